package manager

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// A running job is watched through callbacks, not a goroutine per job
// (watchRun): a cancel through the API still stops its script, and the
// job ends canceled rather than running on.
func TestCancelStopsARunningJob(t *testing.T) {
	m, base := startBerthAt(t, "[autoscaler]\nmax_instances = 1\n")
	admin, err := api.ReadTokenFile(api.TokenPath(m.cfg.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	client := api.NewClient(base)
	client.Token = admin
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, err := client.Submit(ctx, api.JobRequest{Script: "echo the-script-runs; while :; do sleep 1; done"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		var log bytes.Buffer
		if err := client.Log(ctx, job.ID, false, &log); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(log.String(), "the-script-runs") {
			break
		}
		sleepOrFail(ctx, t, "the job's script never ran")
	}
	if _, err := client.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	for {
		j, err := client.Job(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == api.JobCanceled {
			break
		}
		if j.State != api.JobRunning {
			t.Fatalf("job after cancel: %s (%s); want canceled", j.State, j.Reason)
		}
		sleepOrFail(ctx, t, "the job still runs after its cancel")
	}
}

func sleepOrFail(ctx context.Context, t *testing.T, why string) {
	t.Helper()
	select {
	case <-time.After(50 * time.Millisecond):
	case <-ctx.Done():
		t.Fatal(why)
	}
}
