package manager

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/internal/sandboxtest"
)

func TestGitLabInstanceKilledMidJobIsARunnerSystemFailure(t *testing.T) {
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	defer fake.Close()
	id := fake.AddJob(gitlabfake.JobSpec{Script: []string{"echo started", "sleep 120"},
		Variables: []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}}})
	m := startManager(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
check_interval = "100ms"
`, fake.URL()))

	var inst string
	deadline := time.Now().Add(2 * time.Minute)
	for inst == "" {
		if time.Now().After(deadline) {
			t.Fatal("the job never started on an instance")
		}
		for _, v := range m.fleet.Instances() {
			if v.Slots["acquired"] > 0 && strings.Contains(fake.Job(id).Trace(), "started") {
				inst = v.ID
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := sandboxtest.Kill(m.cfg.StateDir, inst); n == 0 {
		t.Fatalf("no process of sandbox %s found to kill", inst)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := fake.WaitAllDone(ctx); err != nil {
		t.Fatal(err)
	}
	j := fake.Job(id)
	if j.FailureReason() != "runner_system_failure" {
		t.Errorf("failure_reason %q, want runner_system_failure", j.FailureReason())
	}
	if !strings.Contains(j.Trace(), inst) {
		t.Errorf("the trace does not name the lost instance %s:\n%s", inst, j.Trace())
	}
}
