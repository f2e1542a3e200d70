package manager

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// An operator deletes instances through the API by berth's own rules: an
// idle one goes, one running a job is kept unless forced, and forced it
// drains: its job runs on to its end. The stop line counts what is left.
func TestDeleteInstancesThroughTheAPI(t *testing.T) {
	m, base := startBerthAt(t, "[autoscaler]\nmax_instances = 2\ncapacity_per_instance = 1\n")
	admin, err := api.ReadTokenFile(api.TokenPath(m.cfg.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	client := api.NewClient(base)
	client.Token = admin
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	long, err := client.Submit(ctx, api.JobRequest{Script: "echo started; while :; do sleep 1; done"})
	if err != nil {
		t.Fatal(err)
	}
	short, err := client.Submit(ctx, api.JobRequest{Script: "true"})
	if err != nil {
		t.Fatal(err)
	}
	busy := waitAPIJob(ctx, t, client, long.ID, func(j api.Job) bool { return j.State == api.JobRunning && j.Instance != "" }).Instance
	idle := waitAPIJob(ctx, t, client, short.ID, func(j api.Job) bool { return j.State.Done() }).Instance
	if idle == busy || idle == "" {
		t.Fatalf("the jobs ran on %q and %q; want two instances", busy, idle)
	}
	if msg, ids := keptInstances(m.fleet); len(ids) != 2 || !strings.Contains(msg, "2 instance(s) keep running") || !strings.Contains(msg, "berth instances delete --all") {
		t.Errorf("stop line %q for %v", msg, ids)
	}

	if _, err := client.DeleteInstances(ctx, api.DeleteInstancesRequest{IDs: []string{busy}, All: true}); !isStatus(err, http.StatusBadRequest) {
		t.Errorf("ids and all together: %v, want 400", err)
	}
	res, err := client.DeleteInstances(ctx, api.DeleteInstancesRequest{All: true})
	if err != nil {
		t.Fatal(err)
	}
	got := outcomes(res)
	if got[idle] != api.InstanceDeleting || got[busy] != api.InstanceKept {
		t.Fatalf("delete --all: %+v, want %s deleting and %s kept", res.Instances, idle, busy)
	}
	for _, d := range res.Instances {
		if d.ID == busy && !strings.Contains(d.Why, "runs 1 job") {
			t.Errorf("kept without saying why: %+v", d)
		}
	}
	res, err = client.DeleteInstances(ctx, api.DeleteInstancesRequest{IDs: []string{busy, "no-such-instance"}, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := outcomes(res); got[busy] != api.InstanceDraining || got["no-such-instance"] != api.InstanceUnknown {
		t.Fatalf("forced delete: %+v, want %s draining and the unknown ID said so", res.Instances, busy)
	}
	if j, err := client.Job(ctx, long.ID); err != nil || j.State != api.JobRunning {
		t.Fatalf("the job on the drained instance: %+v %v, want it still running", j, err)
	}
	if _, err := client.Cancel(ctx, long.ID); err != nil {
		t.Fatal(err)
	}
	// Only the drained instance must go: the idle target may already have
	// started a new one in its place.
	for {
		if _, ids := keptInstances(m.fleet); !slices.Contains(ids, busy) {
			break
		}
		sleepOrFail(ctx, t, "the drained instance was not deleted after its job ended")
	}
}

func waitAPIJob(ctx context.Context, t *testing.T, c *api.Client, id string, ok func(api.Job) bool) api.Job {
	t.Helper()
	for {
		j, err := c.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ok(j) {
			return j
		}
		sleepOrFail(ctx, t, "job "+id+" never got there; last: "+string(j.State))
	}
}

func outcomes(r api.DeleteInstancesResult) map[string]string {
	m := map[string]string{}
	for _, d := range r.Instances {
		m[d.ID] = d.Outcome
	}
	return m
}

func isStatus(err error, status int) bool {
	var e *api.Error
	return errors.As(err, &e) && e.Status == status
}

// `berth instances delete --all --hold` stops the fleet at zero: the idle
// pool is held (the scaler scenario operator_hold shows that nothing idle
// boots while held), a job still runs on an instance made for it, and
// {"hold": false} releases the pool, which then refills.
func TestDeleteAllAndHold(t *testing.T) {
	m, base := startBerthAt(t, "[autoscaler]\nmax_instances = 2\n")
	admin, err := api.ReadTokenFile(api.TokenPath(m.cfg.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	client := api.NewClient(base)
	client.Token = admin
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	held := true
	if _, err := client.DeleteInstances(ctx, api.DeleteInstancesRequest{All: true, Hold: &held}); err != nil {
		t.Fatal(err)
	}
	if !m.fleet.Held() {
		t.Fatal("delete --all --hold did not hold the idle pool")
	}
	j, err := client.Submit(ctx, api.JobRequest{Script: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if done := waitAPIJob(ctx, t, client, j.ID, func(j api.Job) bool { return j.State.Done() }); done.State != api.JobSuccess {
		t.Fatalf("a job while held: %+v, want it run on demand", done)
	}
	release := false
	if _, err := client.DeleteInstances(ctx, api.DeleteInstancesRequest{Hold: &release}); err != nil {
		t.Fatal(err)
	}
	if m.fleet.Held() {
		t.Fatal(`{"hold": false} did not release the idle pool`)
	}
	if _, err := client.DeleteInstances(ctx, api.DeleteInstancesRequest{}); !isStatus(err, http.StatusBadRequest) {
		t.Errorf("a request naming nothing: %v, want 400", err)
	}
}
