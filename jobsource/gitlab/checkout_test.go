package gitlab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

// A job can write anything into its checkout's .git, and with
// GIT_STRATEGY fetch (or two jobs on one instance) berth's own fetch of the
// next job runs git there, outside the job's image and with that job's
// token in its environment (issue 41, item 8). Nothing planted may run:
// hooks, core.hooksPath, core.fsmonitor, core.sshCommand, a smudge filter,
// an include; a .git that is a symlink is not followed.
func TestCheckoutRunsNothingAnEarlierJobPlanted(t *testing.T) {
	repo, sha := gitRepo(t)
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	evil := filepath.Join(dir, "evil.sh")
	if err := os.WriteFile(evil, []byte("#!/bin/sh\nenv >> "+mark+"\ncat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hooks := filepath.Join(dir, "hooks")
	os.Mkdir(hooks, 0o755)
	for _, h := range []string{"post-checkout", "reference-transaction", "pre-auto-gc", "post-merge"} {
		os.Symlink(evil, filepath.Join(hooks, h))
	}
	f := newFake(t, gitlabfake.Options{})
	s := stagedSource(t, f, nil)
	vars := []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "fetch"}, {Key: "GIT_CLONE_PATH", Value: "$CI_BUILDS_DIR/shared/project"}}
	f.AddJob(gitlabfake.JobSpec{RepoURL: repo, Sha: sha, Variables: vars, Script: []string{
		"for h in post-checkout reference-transaction post-merge; do ln -sf " + evil + " .git/hooks/$h; done",
		"git config core.hooksPath " + hooks,
		"git config core.fsmonitor " + evil,
		"git config core.sshCommand " + evil,
		"git config filter.evil.smudge " + evil,
		"git config filter.evil.process " + evil,
		"git config include.path " + filepath.Join(dir, "included"),
		"echo '* filter=evil' > .git/info/attributes",
		"rm README", // so that the next checkout writes it, through the filter
	}})
	if res, out := runStaged(t, takeJob(t, s)); res.Failure != jobsource.FailureNone {
		t.Fatalf("planting job: %+v\n%s", res, out)
	}
	os.WriteFile(filepath.Join(dir, "included"), []byte("[core]\n\thooksPath = "+hooks+"\n"), 0o644)
	os.Remove(mark) // the planting job's own git commands may have run them

	id := f.AddJob(gitlabfake.JobSpec{RepoURL: repo, Sha: sha, Variables: vars, Script: []string{"cat README"}})
	res, out := runStaged(t, takeJob(t, s))
	if res.Failure != jobsource.FailureNone || !strings.Contains(out, "hello from the repo") {
		t.Fatalf("next job: %+v\n%s", res, f.Job(id).Trace())
	}
	if b, err := os.ReadFile(mark); err == nil {
		t.Fatalf("the next job's checkout ran what the earlier job planted, with this environment:\n%s", b)
	}

	// A .git that is a symlink to somewhere else is replaced, not used.
	project := filepath.Join(s.cfg.BuildsDir, "shared", "project")
	elsewhere := filepath.Join(dir, "elsewhere.git")
	if err := os.Rename(filepath.Join(project, ".git"), elsewhere); err != nil {
		t.Fatal(err)
	}
	os.Symlink(elsewhere, filepath.Join(project, ".git"))
	f.AddJob(gitlabfake.JobSpec{RepoURL: repo, Sha: sha, Variables: vars, Script: []string{"test ! -L .git", "cat README"}})
	if res, out := runStaged(t, takeJob(t, s)); res.Failure != jobsource.FailureNone {
		t.Fatalf("job after a symlinked .git: %+v\n%s", res, out)
	}
}

// GIT_SUBMODULE_PATHS picks the submodules to update (here: excludes the
// only one) and GIT_SUBMODULE_DEPTH fetches them shallow, as in GitLab.
func TestSubmodulePathsAndDepth(t *testing.T) {
	repo, sha := repoWithSubmodule(t)
	f := newFake(t, gitlabfake.Options{})
	s := stagedSource(t, f, nil)
	gitCfg := gitlabfake.Variable{Key: "GIT_CONFIG_GLOBAL", Value: filepath.Join(filepath.Dir(strings.TrimPrefix(repo, "file://")), "allow.gitconfig")}
	sub := gitlabfake.Variable{Key: "GIT_SUBMODULE_STRATEGY", Value: "recursive"}
	id := f.AddJob(gitlabfake.JobSpec{RepoURL: repo, Sha: sha, Variables: []gitlabfake.Variable{gitCfg, sub,
		{Key: "GIT_SUBMODULE_PATHS", Value: ":(exclude)sub"}}, Script: []string{"test ! -e sub/SUB", "cat README"}})
	if res, out := runStaged(t, takeJob(t, s)); res.Failure != jobsource.FailureNone || !strings.Contains(out, "top") {
		t.Errorf("GIT_SUBMODULE_PATHS excluding the submodule: %+v\n%s", res, f.Job(id).Trace())
	}
	id = f.AddJob(gitlabfake.JobSpec{RepoURL: repo, Sha: sha, Variables: []gitlabfake.Variable{gitCfg, sub,
		{Key: "GIT_SUBMODULE_DEPTH", Value: "1"}}, Script: []string{"cat sub/SUB", "test -f \"$(git -C sub rev-parse --git-dir)/shallow\" && echo shallow-submodule"}})
	if res, out := runStaged(t, takeJob(t, s)); res.Failure != jobsource.FailureNone || !strings.Contains(out, "shallow-submodule") {
		t.Errorf("GIT_SUBMODULE_DEPTH 1: %+v\n%s", res, f.Job(id).Trace())
	}
	id = f.AddJob(gitlabfake.JobSpec{RepoURL: repo, Sha: sha, Variables: []gitlabfake.Variable{{Key: "GIT_SUBMODULE_DEPTH", Value: "deep"}}, Script: []string{"true"}})
	runStaged(t, takeJob(t, s))
	if r := f.Job(id).FailureReason(); r != "runner_configuration_error" || !strings.Contains(f.Job(id).Trace(), "GIT_SUBMODULE_DEPTH") {
		t.Errorf("bad GIT_SUBMODULE_DEPTH: reason %q\n%s", r, f.Job(id).Trace())
	}
}

// CI_DEBUG_TRACE shows each command as the shell runs it, after a
// warning; masked values stay masked.
func TestDebugTrace(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{Variables: append([]gitlabfake.Variable{{Key: "CI_DEBUG_TRACE", Value: "true"},
		{Key: "SECRET", Value: "hunter2-secret", Masked: true}}, noGit...), Script: []string{`X="$SECRET"`}})
	r := driver{t: t}.run(takeJob(t, newTestSource(t, f, nil)))
	tr := f.Job(id).Trace()
	if r.result.Failure != jobsource.FailureNone || !strings.Contains(tr, "WARNING: CI_DEBUG_TRACE is set") ||
		!strings.Contains(tr, "X=[MASKED]") || strings.Contains(tr, "hunter2") {
		t.Errorf("%+v\n%s", r.result, tr)
	}
}

// The job's own git reaches the project's GitLab with the job token while
// the job runs (GitLab answers 401 without it), and nothing of the token
// stays in the checkout after it, which a GIT_CLONE_PATH checkout with
// GIT_STRATEGY fetch keeps for the next job; the trace never shows it.
func TestJobTokenForTheJobsGitOnlyWhileItRuns(t *testing.T) {
	fileRepo, sha := gitRepo(t)
	f := newFake(t, gitlabfake.Options{})
	repo := f.HTTPRepo(fileRepo)
	s := stagedSource(t, f, nil)
	id := f.AddJob(gitlabfake.JobSpec{RepoURL: repo, Ref: "main", Sha: sha, Variables: []gitlabfake.Variable{
		{Key: "GIT_STRATEGY", Value: "fetch"}, {Key: "GIT_CLONE_PATH", Value: "$CI_BUILDS_DIR/keep/project"}},
		Script: []string{"git fetch -q origin main && echo fetched-by-the-job", "git ls-remote origin main >/dev/null && echo listed"}})
	j := takeJob(t, s)
	res, out := runStaged(t, j)
	tr, token := f.Job(id).Trace(), f.Job(id).Token()
	if res.Failure != jobsource.FailureNone || !strings.Contains(out, "fetched-by-the-job") || !strings.Contains(out, "listed") {
		t.Fatalf("%+v\n%s", res, tr)
	}
	if strings.Contains(tr, token) || strings.Contains(tr, tokenHeaderSecret(j.p)) {
		t.Errorf("the trace shows the job token:\n%s", tr)
	}
	project := filepath.Join(s.cfg.BuildsDir, "keep", "project")
	filepath.WalkDir(filepath.Join(project, ".git"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), token) {
				t.Errorf("%s holds the job token after the job", p)
			}
		}
		return nil
	})
	if _, err := os.Stat(credentialsFile(s.cfg.BuildsDir, j.tmpName)); !os.IsNotExist(err) {
		t.Errorf("the job's git credentials outlive it: %v", err)
	}
}

// hooks: pre_get_sources_script and post_get_sources_script are not run
// (berth's fetch runs outside the job's image), and the log says so
// rather than skipping them silently.
func TestGetSourcesHooksSaidNotRun(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{Variables: noGit, Script: []string{"true"},
		Hooks: []gitlabfake.Step{{Name: "pre_get_sources_script", Script: []string{"echo hook-ran"}}}})
	res, out := runStaged(t, takeJob(t, stagedSource(t, f, nil)))
	tr := f.Job(id).Trace()
	if res.Failure != jobsource.FailureNone || strings.Contains(out, "hook-ran") ||
		!strings.Contains(tr, "WARNING: hooks: pre_get_sources_script is not run by berth") {
		t.Errorf("%+v\n%s", res, tr)
	}
}

// A sha256 repository (git_info.repo_object_format) is fetched into a
// sha256 checkout, the first time and again with GIT_STRATEGY fetch.
func TestSHA256Repository(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Skipf("git %v: %v (no sha256 support?)\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "--object-format=sha256", "-b", "main")
	os.WriteFile(filepath.Join(dir, "README"), []byte("sha256 repo\n"), 0o644)
	git("add", "README")
	git("commit", "-q", "-m", "one")
	sha := git("rev-parse", "HEAD")
	f := newFake(t, gitlabfake.Options{})
	s := stagedSource(t, f, nil)
	for range 2 {
		id := f.AddJob(gitlabfake.JobSpec{RepoURL: "file://" + dir, Sha: sha, RepoObjectFormat: "sha256",
			Variables: []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "fetch"}, {Key: "GIT_CLONE_PATH", Value: "$CI_BUILDS_DIR/sha256/p"}},
			Script:    []string{"cat README", "git rev-parse --show-object-format"}})
		if res, out := runStaged(t, takeJob(t, s)); res.Failure != jobsource.FailureNone || !strings.Contains(out, "sha256 repo\n") || !strings.Contains(out, "\nsha256\n") {
			t.Fatalf("%+v\n%s", res, f.Job(id).Trace())
		}
	}
}
