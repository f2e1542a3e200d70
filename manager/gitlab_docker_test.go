package manager

import (
	"fmt"
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
	repo, sha := gitlabfake.Repo(t)
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	defer fake.Close()
	pipe := gitlabfake.DockerPipeline{Fake: fake, Repo: repo, Sha: sha, Image: img, Variables: []gitlabfake.Variable{
		// The repository is a directory on the host, owned by another uid
		// than the job's; a real GitLab serves it over HTTP.
		{Key: "GIT_CONFIG_GLOBAL", Value: strings.TrimPrefix(repo, "file://") + "/jobs.gitconfig"},
	}}
	build := pipe.AddBuild()

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
	for _, p := range pipe.BuildProblems(build) {
		t.Error(p)
	}
	test := pipe.AddTest(build)
	waitJob(t, fake, test)
	for _, p := range pipe.TestProblems(test) {
		t.Error(p)
	}
	deploy := pipe.AddDeploy(build)
	waitJob(t, fake, deploy)
	for _, p := range pipe.DeployProblems(build, deploy) {
		t.Error(p)
	}
	ttr := fake.Job(test).Trace()
	if a, b := gitlabfake.InstanceOf(fake.Job(build).Trace()), gitlabfake.InstanceOf(ttr); a == "" || a == b {
		t.Errorf("build ran on %q and test on %q: want fresh instances", a, b)
	}

	// An image that cannot be pulled: image_pull_failure, said once, and
	// no after_script (there is nothing to run it in).
	mj := gitlabfake.JobSpec{Name: "missing", Stage: "test", ProjectID: 9, RepoURL: repo, Ref: "main", Sha: sha,
		Image: host + "/nothing:1", Variables: pipe.Variables, Script: []string{"true"}, AfterScript: []string{"echo after"}}
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

// A configured builds_dir is bound into the image too: the checkout is
// there for the script, and what the script leaves there is uploaded, not
// lost in the image's root. (On the local provider it must lie on the
// instance's disk, /berth: its /tmp is not the image launcher's.)
func TestGitLabImageJobConfiguredBuildsDir(t *testing.T) {
	host := imagetest.Registry(t)
	img := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	repo, sha := gitlabfake.Repo(t)
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
