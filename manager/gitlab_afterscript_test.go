package manager

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
)

// after_script as gitlab-runner runs it (issue 41): not after the job's
// timeout (the timeout bounds the whole job), and bounded by
// RUNNER_AFTER_SCRIPT_TIMEOUT, whose end does not fail the job.
func TestGitLabAfterScriptLimits(t *testing.T) {
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	defer fake.Close()
	noGit := []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}}
	timedOut := fake.AddJob(gitlabfake.JobSpec{Variables: noGit, Timeout: time.Second,
		Script: []string{"echo script-started", "sleep 60"}, AfterScript: []string{"echo after-ran"}})
	bounded := fake.AddJob(gitlabfake.JobSpec{Variables: append([]gitlabfake.Variable{{Key: "RUNNER_AFTER_SCRIPT_TIMEOUT", Value: "1s"}}, noGit...),
		Script: []string{"echo script-ran"}, AfterScript: []string{"echo after-started", "sleep 60", "echo after-finished"}})
	startManager(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
check_interval = "100ms"
[autoscaler]
max_instances = 2
[[autoscaler.policy]]
idle_count = 2
`, fake.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second) // well under the sleeps
	defer cancel()
	if err := fake.WaitAllDone(ctx); err != nil {
		t.Fatalf("jobs did not finish before their sleeps would have: %v", err)
	}
	j := fake.Job(timedOut)
	if tr := j.Trace(); j.FailureReason() != "job_execution_timeout" || !strings.Contains(tr, "script-started") || strings.Contains(tr, "after-ran") {
		t.Errorf("timed-out job: reason %q, trace:\n%s", j.FailureReason(), tr)
	}
	j = fake.Job(bounded)
	if tr := j.Trace(); j.ReportedState() != "success" || !strings.Contains(tr, "after-started") || strings.Contains(tr, "after-finished") {
		t.Errorf("job with RUNNER_AFTER_SCRIPT_TIMEOUT 1s: %s, trace:\n%s", j.ReportedState(), tr)
	}
}
