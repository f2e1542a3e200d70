package manager

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/internal/imagetest"
)

// A pipeline written for GitLab's docker executor runs unchanged (issue
// 30): build → test → deploy on a busybox image without git, berth's
// default builds dir, a fresh instance per job. berth fetches the sources
// outside the image into the builds dir the image sees at CI_PROJECT_DIR;
// build's artifacts (with exclude) reach test, the cache reaches a fresh
// instance, a junit, a dotenv and a raw code-quality report are uploaded
// with their types and formats, deploy reads the dotenv variable, and
// out-$CI_JOB_ID/ is expanded.
func TestGitLabDockerPipeline(t *testing.T) {
	host := imagetest.Registry(t)
	img := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	repo, sha := gitRepo(t)
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	defer fake.Close()
	vars := []gitlabfake.Variable{
		// The repository is a directory on the host, owned by another uid
		// than the job's; a real GitLab serves it over HTTP.
		{Key: "GIT_CONFIG_GLOBAL", Value: strings.TrimPrefix(repo, "file://") + "/jobs.gitconfig"},
	}
	job := func(name, stage string, script []string) gitlabfake.JobSpec {
		return gitlabfake.JobSpec{Name: name, Stage: stage, ProjectID: 9, RepoURL: repo, Ref: "main", Sha: sha,
			Image: img, Variables: vars, Script: script}
	}

	b := job("build", "build", []string{
		"! command -v git", // the image has no git
		"cat README",       // yet the sources are there
		`test "$PWD" = "$CI_PROJECT_DIR"`,
		"mkdir -p out-$CI_JOB_ID tmp .cache",
		"echo built > out-$CI_JOB_ID/result.txt",
		"echo scratch > tmp/scratch.txt",
		"echo cached > .cache/c.txt",
		`echo '<testsuite name="unit" tests="1"/>' > junit.xml`,
		"echo DEPLOY_TARGET=staging-$CI_JOB_ID > build.env",
		`echo '[{"description":"x","severity":"minor"}]' > gl-code-quality-report.json`,
	})
	b.Artifacts = []gitlabfake.Artifact{
		{Name: "bin-$CI_JOB_ID", Paths: []string{"out-$CI_JOB_ID/", "tmp/"}, Exclude: []string{"tmp/**"}},
		{Type: "junit", Format: "gzip", Paths: []string{"junit.xml"}},
		{Type: "dotenv", Format: "gzip", Paths: []string{"build.env"}},
		{Type: "codequality", Format: "raw", Paths: []string{"gl-code-quality-report.json"}},
	}
	b.Cache = []gitlabfake.Cache{{Key: "deps", Paths: []string{".cache/"}}}
	build := fake.AddJob(b)

	startManager(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
check_interval = "100ms"
[autoscaler]
max_instances = 2
max_use_count = 1
[autoscaler.provider_config]
network = "host"
host_paths = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", %q]
[[autoscaler.policy]]
idle_count = 0
preemptive_mode = false
[images]
insecure_registries = [%q]
`, fake.URL(), strings.TrimPrefix(repo, "file://"), host))

	waitJob(t, fake, build)
	btr := fake.Job(build).Trace()
	if !strings.Contains(btr, "checked out by berth") || !strings.Contains(btr, "section_start:") {
		t.Errorf("build trace:\n%s", btr)
	}
	ups := fake.Job(build).Artifacts()
	got := map[string]gitlabfake.Uploaded{}
	for _, u := range ups {
		got[u.Type] = u
	}
	bid := fmt.Sprint(build)
	if a := got["archive"]; a.Filename != "bin-"+bid+".zip" || a.Format != "zip" {
		t.Errorf("archive uploaded as %+v", a)
	}
	if u := got["junit"]; u.Format != "gzip" || !strings.Contains(gunzip(t, u.Data), "testsuite") {
		t.Errorf("junit uploaded as %q %q", u.Format, u.Filename)
	}
	if u := got["dotenv"]; u.Format != "gzip" || !strings.Contains(gunzip(t, u.Data), "DEPLOY_TARGET=staging-"+bid) {
		t.Errorf("dotenv uploaded as %q %q", u.Format, u.Filename)
	}
	if u := got["codequality"]; u.Format != "raw" || u.Filename != "gl-code-quality-report.json" || !strings.Contains(string(u.Data), `"severity":"minor"`) {
		t.Errorf("code quality uploaded as %q %q %q", u.Format, u.Filename, u.Data)
	}

	tj := job("test", "test", []string{
		"cat out-" + bid + "/result.txt",
		"test ! -e tmp/scratch.txt",
		"cat .cache/c.txt",
		"cat README",
	})
	tj.Dependencies = []int64{build}
	tj.Cache = []gitlabfake.Cache{{Key: "deps", Paths: []string{".cache/"}, Policy: "pull"}}
	test := fake.AddJob(tj)
	waitJob(t, fake, test)
	ttr := fake.Job(test).Trace()
	for _, want := range []string{"built", "cached", "checked out by berth"} {
		if !strings.Contains(ttr, want) {
			t.Errorf("test trace lacks %q:\n%s", want, ttr)
		}
	}

	dj := job("deploy", "deploy", []string{`echo "deploying to $DEPLOY_TARGET"`})
	dj.Dependencies = []int64{build}
	deploy := fake.AddJob(dj)
	waitJob(t, fake, deploy)
	if dtr := fake.Job(deploy).Trace(); !strings.Contains(dtr, "deploying to staging-"+bid) {
		t.Errorf("deploy did not read the dotenv variable:\n%s", dtr)
	}
	if a, b := instanceOf(btr), instanceOf(ttr); a == "" || a == b {
		t.Errorf("build ran on %q and test on %q: want fresh instances", a, b)
	}

	// An image that cannot be pulled: image_pull_failure, said once, and
	// no after_script (there is nothing to run it in).
	mj := job("missing", "test", []string{"true"})
	mj.Image, mj.AfterScript = host+"/nothing:1", []string{"echo after"}
	// A GitLab that knows image_pull_failure lists it for the job.
	mj.FailureReasons = append(append([]string(nil), gitlabfake.DefaultFailureReasons...), "image_pull_failure")
	missing := fake.AddJob(mj)
	if err := fake.WaitAllDone(t.Context()); err != nil {
		t.Fatal(err)
	}
	mtr := fake.Job(missing).Trace()
	if r := fake.Job(missing).FailureReason(); r != "image_pull_failure" || strings.Contains(mtr, "system failure") ||
		strings.Contains(mtr, "after_script") || !strings.Contains(mtr, "nothing:1") {
		t.Errorf("missing image: reason %q, trace:\n%s", r, mtr)
	}
	t.Logf("test trace:\n%s", ttr)
}

func gunzip(t *testing.T, b []byte) string {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(zr)
	return string(out)
}

// A configured builds_dir is bound into the image too: the checkout is
// there for the script, and what the script leaves there is uploaded, not
// lost in the image's root. (On the local provider it must lie on the
// instance's disk, /berth: its /tmp is not the image launcher's.)
func TestGitLabImageJobConfiguredBuildsDir(t *testing.T) {
	host := imagetest.Registry(t)
	img := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	repo, sha := gitRepo(t)
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	defer fake.Close()
	id := fake.AddJob(gitlabfake.JobSpec{RepoURL: repo, Ref: "main", Sha: sha, Image: img,
		Variables: []gitlabfake.Variable{{Key: "GIT_CONFIG_GLOBAL", Value: strings.TrimPrefix(repo, "file://") + "/jobs.gitconfig"}},
		Script:    []string{`case "$CI_PROJECT_DIR" in /berth/ci-builds/*) ;; *) exit 7;; esac`, "cat README", "mkdir out", "echo made > out/x"},
		Artifacts: []gitlabfake.Artifact{{Paths: []string{"out/"}}}})
	startManager(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
check_interval = "100ms"
builds_dir = "/berth/ci-builds"
[autoscaler]
max_instances = 1
[autoscaler.provider_config]
network = "host"
host_paths = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", %q]
[images]
insecure_registries = [%q]
`, fake.URL(), strings.TrimPrefix(repo, "file://"), host))
	waitJob(t, fake, id)
	ups := fake.Job(id).Artifacts()
	if tr := fake.Job(id).Trace(); len(ups) != 1 || !strings.Contains(tr, "checked out by berth") || !strings.Contains(tr, "out/: found 2 matching") {
		t.Errorf("%d uploads, trace:\n%s", len(ups), tr)
	}
}
