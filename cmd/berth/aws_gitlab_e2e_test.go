package main

// End-to-end test of a GitLab pipeline written for the docker executor on
// cloud instances: the real berth binary takes the jobs from the GitLab
// fake and runs them through the real berth-provider-aws plugin on the
// fake AWS region, whose instances are SSH hosts on this machine.

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/berth-ci/berth/internal/awsfake"
	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/internal/imagetest"
)

// The pipeline of manager's TestGitLabDockerPipeline (issue 30), on AWS
// instances reached over SSH instead of local sandboxes: build → test →
// deploy on a busybox image without git, berth's default builds dir, a
// fresh instance per job (max_use_count = 1). berth fetches the sources on
// the instance outside the image and the image pulls on the instance; the
// cache build leaves is restored on another instance from berth's own
// cache, build's artifacts (with exclude) reach test through GitLab, a
// junit, a dotenv and a raw code-quality report are uploaded with their
// types and formats, deploy reads the dotenv variable and out-$CI_JOB_ID/
// is expanded.
func TestAWSPluginRunsTheDockerExecutorPipeline(t *testing.T) {
	host := imagetest.Registry(t)
	img := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	repo, sha := pipelineRepo(t)
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-aws", TraceUpdateInterval: 1})
	t.Cleanup(fake.Close)
	job := func(name, stage string, script []string) gitlabfake.JobSpec {
		return gitlabfake.JobSpec{Name: name, Stage: stage, ProjectID: 9, RepoURL: repo, Ref: "main", Sha: sha,
			Image: img, Script: script}
	}

	b := job("build", "build", []string{
		"grep -q NAME=berth-test-image /etc/os-release", // the script runs in the image
		"! command -v git", // which has no git (the instance has)
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

	// Two instances at most: each job gets a fresh one, and the group
	// replaces the one a finished job used while the next job waits.
	_, _, autoscaler := awsFake(t, awsfake.Options{MaxSize: 2, BootTime: 200 * time.Millisecond,
		TerminateTime: 200 * time.Millisecond}, 2)
	autoscaler = withAutoscalerKeys(t, autoscaler, map[string]any{
		"max_use_count": 1,
		"policy":        []map[string]any{{"idle_count": 0, "preemptive_mode": false}},
	})
	newDaemon(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-aws"
check_interval = "100ms"

[images]
insecure_registries = [%q]

%s`, fake.URL(), host, autoscaler))

	waitGitLabJob(t, fake, build)
	btr := fake.Job(build).Trace()
	if !strings.Contains(btr, "checked out by berth") || !strings.Contains(btr, "section_start:") {
		t.Errorf("build trace:\n%s", btr)
	}
	// berth pulls on the host only for local instances; the instance's
	// runner pulled this one itself.
	if !strings.Contains(btr, "Pulled image "+img) || strings.Contains(btr, "on the host") {
		t.Errorf("the build trace does not show the instance pulling %s:\n%s", img, btr)
	}
	got := map[string]gitlabfake.Uploaded{}
	for _, u := range fake.Job(build).Artifacts() {
		got[u.Type] = u
	}
	bid := fmt.Sprint(build)
	if a := got["archive"]; a.Filename != "bin-"+bid+".zip" || a.Format != "zip" {
		t.Errorf("archive uploaded as %q %q", a.Format, a.Filename)
	}
	if u := got["junit"]; u.Format != "gzip" || !strings.Contains(gunzipString(t, u.Data), "testsuite") {
		t.Errorf("junit uploaded as %q %q", u.Format, u.Filename)
	}
	if u := got["dotenv"]; u.Format != "gzip" || !strings.Contains(gunzipString(t, u.Data), "DEPLOY_TARGET=staging-"+bid) {
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
	waitGitLabJob(t, fake, test)
	ttr := fake.Job(test).Trace()
	for _, want := range []string{"built", "cached", "checked out by berth"} {
		if !strings.Contains(ttr, want) {
			t.Errorf("test trace lacks %q:\n%s", want, ttr)
		}
	}

	dj := job("deploy", "deploy", []string{`echo "deploying to $DEPLOY_TARGET"`})
	dj.Dependencies = []int64{build}
	deploy := fake.AddJob(dj)
	waitGitLabJob(t, fake, deploy)
	dtr := fake.Job(deploy).Trace()
	if !strings.Contains(dtr, "deploying to staging-"+bid) {
		t.Errorf("deploy did not read the dotenv variable:\n%s", dtr)
	}

	on := map[string]string{}
	for name, tr := range map[string]string{"build": btr, "test": ttr, "deploy": dtr} {
		in := instanceOfTrace(tr)
		if in == "" {
			t.Errorf("the %s trace does not name its instance", name)
			continue
		}
		if other, ok := on[in]; ok {
			t.Errorf("%s and %s both ran on %s: want a fresh instance per job", other, name, in)
		}
		on[in] = name
	}
	t.Logf("test trace:\n%s", ttr)
}

// withAutoscalerKeys adds keys to the [autoscaler] table of cfg: TOML
// does not let a table be reopened further down the file.
func withAutoscalerKeys(t *testing.T, cfg string, keys map[string]any) string {
	t.Helper()
	var doc map[string]map[string]any
	if _, err := toml.Decode(cfg, &doc); err != nil {
		t.Fatal(err)
	}
	for k, v := range keys {
		doc["autoscaler"][k] = v
	}
	var b bytes.Buffer
	enc := toml.NewEncoder(&b)
	enc.Indent = ""
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// pipelineRepo makes a git repository with one commit on main, whose
// README says "checked out by berth", and returns its file:// URL and
// the commit. The fake's instances are this machine, so they reach it.
func pipelineRepo(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("checked out by berth\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "README")
	git("commit", "-q", "-m", "first")
	return "file://" + dir, git("rev-parse", "HEAD")
}

// waitGitLabJob waits until every job of the fake is done and job id
// succeeded. The bound is a guard against a hang, not an expectation: a
// fresh instance, the runner's copy and a pull come before each script.
func waitGitLabJob(t *testing.T, fake *gitlabfake.Fake, id int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := fake.WaitAllDone(ctx); err != nil {
		t.Fatalf("job %d did not finish: %v\n%s", id, err, fake.Job(id).Trace())
	}
	if j := fake.Job(id); j.ReportedState() != "success" {
		t.Fatalf("job %d: %s (%s)\n%s", id, j.ReportedState(), j.FailureReason(), j.Trace())
	}
}

// instanceOfTrace reads the instance a job ran on from its trace.
func instanceOfTrace(trace string) string {
	_, rest, ok := strings.Cut(trace, "Running on instance ")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "\n")
	return id
}

func gunzipString(t *testing.T, b []byte) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
