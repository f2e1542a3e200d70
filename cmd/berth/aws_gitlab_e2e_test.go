package main

// End-to-end test of a GitLab pipeline written for the docker executor on
// cloud instances: the real berth binary takes the jobs from the GitLab
// fake and runs them through the real berth-provider-aws plugin on the
// fake AWS region, whose instances are SSH hosts on this machine.

import (
	"bytes"
	"context"
	"fmt"
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
	repo, sha := gitlabfake.Repo(t)
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-aws", TraceUpdateInterval: 1})
	t.Cleanup(fake.Close)
	pipe := gitlabfake.DockerPipeline{Fake: fake, Repo: repo, Sha: sha, Image: img}
	build := pipe.AddBuild()

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
	for _, p := range pipe.BuildProblems(build) {
		t.Error(p)
	}
	btr := fake.Job(build).Trace()
	// berth pulls on the host only for local instances; the instance's
	// runner pulled this one itself.
	if !strings.Contains(btr, "Pulled image "+img) || strings.Contains(btr, "on the host") {
		t.Errorf("the build trace does not show the instance pulling %s:\n%s", img, btr)
	}
	test := pipe.AddTest(build)
	waitGitLabJob(t, fake, test)
	for _, p := range pipe.TestProblems(test) {
		t.Error(p)
	}
	deploy := pipe.AddDeploy(build)
	waitGitLabJob(t, fake, deploy)
	for _, p := range pipe.DeployProblems(build, deploy) {
		t.Error(p)
	}

	ttr, dtr := fake.Job(test).Trace(), fake.Job(deploy).Trace()
	on := map[string]string{}
	for name, tr := range map[string]string{"build": btr, "test": ttr, "deploy": dtr} {
		in := gitlabfake.InstanceOf(tr)
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
