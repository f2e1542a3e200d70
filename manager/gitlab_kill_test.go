package manager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
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
	if n := killSandboxProcesses(inst); n == 0 {
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

// killSandboxProcesses kills every process of a local sandbox, found by the
// marker in its environment, as a crashed VM would vanish.
func killSandboxProcesses(id string) int {
	killed := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if strings.HasPrefix(kv, "BERTH_LOCAL_SANDBOX=") && filepath.Base(kv) == id {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed++
				}
			}
		}
	}
	return killed
}
