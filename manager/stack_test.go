package manager

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// A running job holds one goroutine in berth for its whole run. Blocked
// in Wait directly under runJob it holds about 1 KiB of frames, so the
// runtime shrinks its stack to 4 KiB at a GC (it halves a stack only while
// less than a quarter of it is in use). Blocked under runJob, execute and
// runScript (4.9 KiB) it kept 8 KiB or more: 8.8 to 9.2 KiB of stack
// per job here before, 4.0 to 5.2 now.
func TestARunningJobHoldsAFourKiBStack(t *testing.T) {
	if raceEnabled {
		t.Skip("frame sizes under the race detector are not a release's")
	}
	const jobs = 80
	m, base := startBerthAt(t, "[autoscaler]\nmax_instances = 4\ncapacity_per_instance = 20\n")
	admin, err := api.ReadTokenFile(api.TokenPath(m.cfg.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	client := api.NewClient(base)
	client.Token = admin
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before := stackInUse()
	var ids []string
	t.Cleanup(func() {
		for _, id := range ids {
			client.Cancel(context.Background(), id)
		}
	})
	for range jobs {
		job, err := client.Submit(ctx, api.JobRequest{Script: "echo the-script-runs; exec sleep 600"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, job.ID)
	}
	for _, id := range ids {
		waitForLog(ctx, t, client, id, "the-script-runs")
	}
	after := stackInUse()
	perJob := float64(after-before) / jobs
	t.Logf("goroutine stacks: %d KiB before the jobs, %d KiB with %d running: %.1f KiB per job", before>>10, after>>10, jobs, perJob/1024)
	if perJob > 7*1024 {
		t.Errorf("%.1f KiB of goroutine stack per running job; want about 4: are the frames a job's goroutine holds while its script runs (runJob, executor.Running.Wait) larger again?", perJob/1024)
	}
}

// waitForLog waits until the job's log holds want.
func waitForLog(ctx context.Context, t *testing.T, client *api.Client, id, want string) {
	t.Helper()
	for {
		var log bytes.Buffer
		if err := client.Log(ctx, id, false, &log); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(log.String(), want) {
			return
		}
		sleepOrFail(ctx, t, "a job's script never ran")
	}
}

// stackInUse is the goroutine stacks in use after GCs have shrunk every
// stack that can be (a GC halves a stack at most once).
func stackInUse() uint64 {
	for range 3 {
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.StackInuse
}
