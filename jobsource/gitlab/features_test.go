package gitlab

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-ci/berth/cache"
	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

// implemented is every GitLab Runner feature berth does, with where it is
// shown to work. The advertised set must be exactly this.
var implemented = map[string]string{
	"variables":                 "TestJobRunsAndTraceEqualsOutput",
	"raw_variables":             "TestFeaturesAdvertisedAreImplemented (raw)",
	"masking":                   "mask_test.go",
	"refspecs":                  "TestJobRunsAndTraceEqualsOutput",
	"image":                     "manager TestGitLabDockerPipeline",
	"services":                  "jobroot services_test.go",
	"service_multiple_aliases":  "TestFeaturesAdvertisedAreImplemented (aliases)",
	"service_variables":         "TestServiceOptionsFromThePayload; jobroot TestServiceVariablesAndPortWaitedFor; manager TestGitLabServiceOptions",
	"image_executor_opts":       "TestServiceOptionsFromThePayload, TestPlatformOtherThanAmd64Refused; jobroot TestJobUserFromTheJob",
	"service_executor_opts":     "TestServiceOptionsFromThePayload, TestPlatformOtherThanAmd64Refused",
	"artifacts":                 "stage_test.go",
	"upload_multiple_artifacts": "TestFeaturesAdvertisedAreImplemented (reports)",
	"upload_raw_artifacts":      "TestRawReportAndExpandedPaths",
	"artifacts_exclude":         "TestFeaturesAdvertisedAreImplemented (exclude)",
	"cache":                     "TestCorruptCacheIgnored",
	"fallback_cache_keys":       "TestFeaturesAdvertisedAreImplemented (fallback)",
	"trace_reset":               "TestUpdateChecksumMismatch",
	"trace_checksum":            "TestUpdateChecksumMismatch",
	"trace_size":                "errors_test.go",
	"cancelable":                "gitlab_test.go",
	"return_exit_code":          "TestJobRunsAndTraceEqualsOutput",
	"cancel_gracefully":         "gitlab_test.go",
}

// The advertised set equals the implemented one, and the jobs GitLab gates
// on the features berth claims are handed out and work: reports (gzip and
// raw), exclude, fallback keys, raw variables, several service aliases. A
// job needing one berth does not claim (release:) never reaches it.
func TestFeaturesAdvertisedAreImplemented(t *testing.T) {
	b, _ := json.Marshal(advertised())
	var all map[string]bool
	_ = json.Unmarshal(b, &all)
	for k, on := range all {
		if _, ok := implemented[k]; on != ok {
			t.Errorf("feature %s: advertised %v, implemented %v", k, on, ok)
		}
	}
	for k := range implemented {
		if _, ok := all[k]; !ok {
			t.Errorf("feature %s is implemented but has no field under GitLab's name", k)
		}
	}

	f := newFake(t, gitlabfake.Options{})
	st, err := cache.NewLocal(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(t.Context(), "gitlab/"+serverName(f.URL())+"/project/0/old-key", bytes.NewReader(zipOf(t, "c/from-fallback", "fallback"))); err != nil {
		t.Fatal(err)
	}
	id := f.AddJob(gitlabfake.JobSpec{Variables: append([]gitlabfake.Variable{{Key: "RAW", Value: "lit-$HOME", Raw: true}}, noGit...),
		Script: []string{`echo "raw=$RAW"`, "mkdir -p out", "echo keep > out/a", "echo drop > out/b.tmp",
			`echo '<testsuite/>' > junit.xml`, `echo '[]' > gl-code-quality-report.json`, "cat c/from-fallback"},
		Artifacts: []gitlabfake.Artifact{{Paths: []string{"out/"}, Exclude: []string{"out/*.tmp"}},
			{Type: "junit", Format: "gzip", Paths: []string{"junit.xml"}},
			{Type: "codequality", Format: "raw", Paths: []string{"gl-code-quality-report.json"}}},
		Cache: []gitlabfake.Cache{{Key: "new-key", FallbackKeys: []string{"old-key"}, Paths: []string{"c/"}}},
	})
	res, out := runStaged(t, takeJob(t, stagedSource(t, f, st)))
	if res.Failure != jobsource.FailureNone {
		t.Fatalf("%+v\n%s", res, f.Job(id).Trace())
	}
	if !strings.Contains(out, "raw=lit-$HOME") || !strings.Contains(out, "fallback") {
		t.Errorf("raw variable or fallback cache missing:\n%s", out)
	}
	ups := f.Job(id).Artifacts()
	var types []string
	for _, u := range ups {
		types = append(types, u.Type+"/"+u.Format)
	}
	if !slices.Equal(types, []string{"archive/zip", "junit/gzip", "codequality/raw"}) {
		t.Errorf("uploaded %v", types)
	}
	if names := zipNames(t, ups[0].Data); !slices.Equal(names, []string{"out/", "out/a"}) {
		t.Errorf("archive holds %v, want out/a without the excluded out/b.tmp", names)
	}

	// A release: job needs multi_build_steps: GitLab (the fake) drops it
	// as runner_unsupported and berth never sees it.
	rel := f.AddJob(gitlabfake.JobSpec{Script: []string{"true"}, Steps: []gitlabfake.Step{{Name: "release", Script: []string{"release-cli create"}}}})
	other := f.AddJob(gitlabfake.JobSpec{Variables: noGit, Script: []string{"true"}})
	if j := takeJob(t, stagedSource(t, f, nil)); j.p.ID != other {
		t.Fatalf("got job %d, want %d (the release job dropped)", j.p.ID, other)
	}
	if fj := f.Job(rel); fj.FailureReason() != gitlabfake.ReasonRunnerUnsupported || !slices.Equal(fj.Missing(), []string{"multi_build_steps"}) {
		t.Errorf("release job: reason %q, missing %v", fj.FailureReason(), fj.Missing())
	}

	// Aliases: comma or space separated, passed on as a list.
	var p jobPayload
	_ = json.Unmarshal([]byte(`{"image":"busybox","services":[{"name":"postgres:16","alias":"db, pg  sql"}]}`), &p)
	if _, svcs := payloadImage(&p, nil); len(svcs) != 1 || svcs[0].Alias != "db,pg,sql" {
		t.Errorf("services = %+v", svcs)
	}
}

// An older GitLab hands out a release: job anyway: it fails at once as
// runner_unsupported, not as a system failure to retry.
func TestReleaseStepFailsAsUnsupported(t *testing.T) {
	f := newFake(t, gitlabfake.Options{IgnoreRunnerFeatures: true})
	id := f.AddJob(gitlabfake.JobSpec{Variables: noGit, Script: []string{"echo script-ran"},
		Steps: []gitlabfake.Step{{Name: "release", Script: []string{"release-cli create --tag-name v1"}}}})
	res, out := runStaged(t, takeJob(t, stagedSource(t, f, nil)))
	tr := f.Job(id).Trace()
	if res.Failure == jobsource.FailureNone || strings.Contains(out, "script-ran") {
		t.Fatalf("result %+v, output %q", res, out)
	}
	if r := f.Job(id).FailureReason(); r != "runner_unsupported" || strings.Contains(tr, "retry the job") || !strings.Contains(tr, `"release" step`) {
		t.Errorf("reason %q, trace:\n%s", r, tr)
	}
}

// Artifact names and paths are expanded ($CI_JOB_ID); a raw report is
// uploaded as the file itself; paths that match nothing warn, as GitLab
// Runner does, and the job still succeeds.
func TestRawReportAndExpandedPaths(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{Variables: noGit,
		Script: []string{"mkdir -p out-$CI_JOB_ID", "echo x > out-$CI_JOB_ID/x", `echo '[{"description":"d"}]' > gl-code-quality-report.json`},
		Artifacts: []gitlabfake.Artifact{{Name: "named-$CI_JOB_ID", Paths: []string{"out-$CI_JOB_ID/", "nothing/"}},
			{Type: "codequality", Format: "raw", Paths: []string{"gl-code-quality-report.json"}}}})
	res, _ := runStaged(t, takeJob(t, stagedSource(t, f, nil)))
	tr := f.Job(id).Trace()
	if res.Failure != jobsource.FailureNone {
		t.Fatalf("%+v\n%s", res, tr)
	}
	ups := f.Job(id).Artifacts()
	if len(ups) != 2 {
		t.Fatalf("%d uploads:\n%s", len(ups), tr)
	}
	sid := f.Job(id).ID()
	want := "out-" + itoa(sid) + "/x"
	if ups[0].Filename != "named-"+itoa(sid)+".zip" || !slices.Contains(zipNames(t, ups[0].Data), want) {
		t.Errorf("archive %s holds %v, want %s", ups[0].Filename, zipNames(t, ups[0].Data), want)
	}
	if u := ups[1]; u.Type != "codequality" || u.Format != "raw" || u.Filename != "gl-code-quality-report.json" || string(u.Data) != "[{\"description\":\"d\"}]\n" {
		t.Errorf("raw report uploaded as %+v %q", u, u.Data)
	}
	if !strings.Contains(tr, "nothing/: no matching files") {
		t.Errorf("no warning for the path that matched nothing:\n%s", tr)
	}

	// Nothing matches at all: a warning, and the job still succeeds.
	id = f.AddJob(gitlabfake.JobSpec{Variables: noGit, Script: []string{"true"}, Artifacts: []gitlabfake.Artifact{{Paths: []string{"out/"}}}})
	res, _ = runStaged(t, takeJob(t, stagedSource(t, f, nil)))
	if tr := f.Job(id).Trace(); res.Failure != jobsource.FailureNone || !strings.Contains(tr, "out/: no matching files") || !strings.Contains(tr, "No files to upload") {
		t.Errorf("%+v\n%s", res, tr)
	}
}

// The sources are fetched by berth before the script, with the git
// variables: GIT_DEPTH, GIT_SUBMODULE_STRATEGY recursive, GIT_CLONE_PATH;
// GIT_CHECKOUT false leaves the tree empty; a repository that cannot be
// fetched is tried GET_SOURCES_ATTEMPTS times and fails as script_failure.
func TestGitVariables(t *testing.T) {
	repo, sha := repoWithSubmodule(t)
	f := newFake(t, gitlabfake.Options{})
	s := stagedSource(t, f, nil)
	id := f.AddJob(gitlabfake.JobSpec{RepoURL: repo, Sha: sha, Refspecs: []string{"+refs/heads/main:refs/remotes/origin/main"},
		Variables: []gitlabfake.Variable{{Key: "GIT_DEPTH", Value: "1"}, {Key: "GIT_SUBMODULE_STRATEGY", Value: "recursive"},
			{Key: "GIT_CLONE_PATH", Value: "$CI_BUILDS_DIR/custom/$CI_JOB_NAME"}, {Key: "GIT_CONFIG_GLOBAL", Value: filepath.Join(filepath.Dir(strings.TrimPrefix(repo, "file://")), "allow.gitconfig")}},
		Name:   "gitjob",
		Script: []string{"pwd", "cat README", "cat sub/SUB", "git rev-list --count HEAD"}})
	res, out := runStaged(t, takeJob(t, s))
	if res.Failure != jobsource.FailureNone {
		t.Fatalf("%+v\n%s", res, f.Job(id).Trace())
	}
	for _, want := range []string{filepath.Join(s.cfg.BuildsDir, "custom", "gitjob") + "\n", "top\n", "submodule\n", "\n1\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	id = f.AddJob(gitlabfake.JobSpec{RepoURL: repo, Sha: sha, Variables: []gitlabfake.Variable{{Key: "GIT_CHECKOUT", Value: "false"}},
		Script: []string{"test ! -e README", "test -d .git"}})
	if res, _ := runStaged(t, takeJob(t, s)); res.Failure != jobsource.FailureNone {
		t.Errorf("GIT_CHECKOUT false: %+v\n%s", res, f.Job(id).Trace())
	}

	id = f.AddJob(gitlabfake.JobSpec{RepoURL: "file:///nonexistent/repo", Sha: sha, Variables: []gitlabfake.Variable{{Key: "GET_SOURCES_ATTEMPTS", Value: "2"}},
		Script: []string{"echo script-ran"}})
	res, out = runStaged(t, takeJob(t, s))
	tr := f.Job(id).Trace()
	if res.Failure == jobsource.FailureNone || strings.Contains(out, "script-ran") || strings.Count(tr, "Fetching changes") != 2 ||
		f.Job(id).FailureReason() != "script_failure" {
		t.Errorf("%+v reason %q\n%s", res, f.Job(id).FailureReason(), tr)
	}

	id = f.AddJob(gitlabfake.JobSpec{Variables: []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "sideways"}}, Script: []string{"true"}})
	runStaged(t, takeJob(t, s))
	if r := f.Job(id).FailureReason(); r != "runner_configuration_error" || !strings.Contains(f.Job(id).Trace(), "GIT_STRATEGY") {
		t.Errorf("bad GIT_STRATEGY: reason %q\n%s", r, f.Job(id).Trace())
	}
}

// repoWithSubmodule makes a repository whose commit has a submodule (in a
// sibling repository, by relative URL) and returns its URL and SHA.
func repoWithSubmodule(t *testing.T) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	root := t.TempDir()
	// file:// submodules need protocol.file.allow (git 2.38.1 and later).
	cfg := filepath.Join(root, "allow.gitconfig")
	if err := os.WriteFile(cfg, []byte("[protocol \"file\"]\n\tallow = always\n[safe]\n\tdirectory = *\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git := func(dir string, args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL="+cfg)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	sub, top := filepath.Join(root, "sub"), filepath.Join(root, "top")
	for _, d := range []string{sub, top} {
		os.Mkdir(d, 0o755)
		git(d, "init", "-q")
	}
	os.WriteFile(filepath.Join(sub, "SUB"), []byte("submodule\n"), 0o644)
	git(sub, "add", "SUB")
	git(sub, "commit", "-q", "-m", "sub")
	os.WriteFile(filepath.Join(top, "README"), []byte("top\n"), 0o644)
	git(top, "add", "README")
	git(top, "commit", "-q", "-m", "one")
	git(top, "submodule", "add", "-q", "../sub", "sub")
	git(top, "commit", "-q", "-m", "two")
	return "file://" + top, git(top, "rev-parse", "HEAD")
}

func zipOf(t *testing.T, kv ...string) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for i := 0; i+1 < len(kv); i += 2 {
		w, _ := zw.Create(kv[i])
		w.Write([]byte(kv[i+1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func zipNames(t *testing.T, data []byte) []string {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	return names
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A job's image:pull_policy is honoured within the admin's allowed list:
// the first allowed one is used; a job asking only for others fails at
// once as runner_configuration_error, saying what to change.
func TestImagePullPolicy(t *testing.T) {
	im := &jobImage{Name: "busybox", PullPolicy: []string{"always", "if-not-present"}}
	if p, err := pullPolicy(im, []string{"if-not-present"}); p != "if-not-present" || err != nil {
		t.Errorf("pullPolicy = %q, %v", p, err)
	}
	if p, err := pullPolicy(&jobImage{Name: "busybox"}, nil); p != "" || err != nil {
		t.Errorf("no pull_policy: %q, %v", p, err)
	}

	f := newFake(t, gitlabfake.Options{})
	ok := f.AddJob(gitlabfake.JobSpec{Variables: noGit, Image: "busybox", ImagePullPolicy: []string{"never", "always"}, Script: []string{"true"}})
	bad := f.AddJob(gitlabfake.JobSpec{Variables: noGit, Image: "busybox", ImagePullPolicy: []string{"never"}, Script: []string{"echo script-ran"}})
	s := newTestSource(t, f, func(c *Config) { c.AllowedPullPolicies = []string{"if-not-present", "always"} })
	j := takeJob(t, s)
	if j.p.ID != ok || j.Spec().Image.PullPolicy != "always" {
		t.Errorf("job %d: pull policy %q, want always", j.p.ID, j.Spec().Image.PullPolicy)
	}
	r := driver{t: t}.run(takeJob(t, s))
	tr := f.Job(bad).Trace()
	if strings.Contains(r.output, "script-ran") || f.Job(bad).FailureReason() != "runner_configuration_error" || !strings.Contains(tr, "allowed_pull_policies") {
		t.Errorf("reason %q:\n%s", f.Job(bad).FailureReason(), tr)
	}
}
