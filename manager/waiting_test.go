package manager

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// A job queued behind a fleet at max_instances says so (waiting_for) in
// the API, and the refusal counts as max_instances; once it runs, it no
// longer says why it waited.
func TestQueuedJobSaysWhyItWaits(t *testing.T) {
	m, base := startBerthAt(t, "[autoscaler]\nmax_instances = 1\ncapacity_per_instance = 1\n")
	admin, err := api.ReadTokenFile(api.TokenPath(m.cfg.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	client := api.NewClient(base)
	client.Token = admin
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	first, err := client.Submit(ctx, api.JobRequest{Script: "while :; do sleep 1; done"})
	if err != nil {
		t.Fatal(err)
	}
	for j := first; j.State != api.JobRunning; {
		sleepOrFail(ctx, t, "the first job never ran")
		if j, err = client.Job(ctx, first.ID); err != nil {
			t.Fatal(err)
		}
	}
	second, err := client.Submit(ctx, api.JobRequest{Script: "echo second"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		j, err := client.Job(ctx, second.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != api.JobQueued {
			t.Fatalf("second job: %s, want queued behind the first", j.State)
		}
		if j.WaitingFor == api.WaitMaxInstances {
			if !strings.Contains(j.WaitingDetail, "max_instances") {
				t.Errorf("waiting_detail %q does not say what to change", j.WaitingDetail)
			}
			break
		}
		sleepOrFail(ctx, t, "the queued job never said it waits for max_instances; last: "+j.WaitingFor)
	}
	list, err := client.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range list {
		if want := map[string]string{first.ID: "", second.ID: api.WaitMaxInstances}[j.ID]; j.WaitingFor != want {
			t.Errorf("job %s in the list: waiting_for %q, want %q", j.ID, j.WaitingFor, want)
		}
	}
	if refused := m.fleet.Counts().Refused; refused["max_instances"] == 0 || refused["no_idle_slot"] != 0 {
		t.Errorf("refusals counted %v, want max_instances only", refused)
	}
	if _, err := client.Cancel(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	for {
		j, err := client.Job(ctx, second.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State.Done() {
			if j.WaitingFor != "" || j.State != api.JobSuccess {
				t.Fatalf("second job ended %s with waiting_for %q", j.State, j.WaitingFor)
			}
			break
		}
		sleepOrFail(ctx, t, "the second job never ran")
	}
}

// A throttled Increase is not a lack of capacity: the job waits for the
// throttle, with the provider's words (the time it ends); a quota or a
// stockout is capacity.
func TestIncreaseWaitTellsAThrottleFromCapacity(t *testing.T) {
	for _, c := range []struct{ err, reason string }{
		{"azure: API request rate exceeded: update scale set capacity was throttled even after the SDK's retries; Azure asked for no call before 2026-12-07T22:00:00Z", api.WaitThrottled},
		{"aws: API request rate exceeded: SetDesiredCapacity: Throttling: Rate exceeded", api.WaitThrottled},
		{"azure: quota exceeded: update scale set capacity: OperationNotAllowed", api.WaitCapacity},
		{"gcp: API rate or quota exceeded: resize: operation op-1: QUOTA_EXCEEDED: Quota 'CPUS' exceeded", api.WaitCapacity},
	} {
		reason, detail := increaseWait(c.err)
		if reason != c.reason || !strings.Contains(detail, c.err) {
			t.Errorf("%q: %s, %q; want %s with the provider's words", c.err, reason, detail, c.reason)
		}
		if reason == api.WaitThrottled && strings.Contains(detail, "could not create") {
			t.Errorf("%q: detail %q says instances could not be created", c.err, detail)
		}
	}
}
