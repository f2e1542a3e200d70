package manager

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource/queue"
	"github.com/berth-ci/berth/scaler"
)

// Issue 19, failure 5: berth is killed after the environment was parked
// (state.db holds its key) but before the job's record got the key. At
// the next start the queue fails the job for the restart; the parked
// environment's saved state names the job and its result, so the job gets
// its success and its key back, and its submitter may resume it.
func TestParkedEnvironmentAndJobRecordAgreeAfterAKillInBetween(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "queue")
	quiet := queue.WithLogger(slog.New(slog.DiscardHandler))
	q, err := queue.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := q.SubmitAs(api.Principal{Name: "alice"}, api.JobRequest{Script: "true", Suspend: true})
	if err != nil {
		t.Fatal(err)
	}
	if j, err := q.Request(context.Background()); err != nil || j == nil {
		t.Fatalf("request: %v %v", j, err)
	}
	q.Close() // the kill: the job's record still says running

	q, err = queue.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if j, _ := q.Get(sub.ID); j.State != api.JobFailed || j.Reason != queue.RestartReason {
		t.Fatalf("after the restart the job is %s (%s), want failed for the restart before reconciling", j.State, j.Reason)
	}
	state, _ := json.Marshal(envState{Job: sub.ID, Source: "queue", ExitCode: 0})
	other, _ := json.Marshal(envState{Job: "999", Source: "queue"})
	m := &Manager{queue: q, log: slog.New(slog.DiscardHandler)}
	m.reconcileParked([]scaler.EnvRecord{
		{Key: "s1-parked", InstanceID: "i1", State: state},
		{Key: "s1-other", InstanceID: "i2", State: other},
	}, q.Interrupted())

	j, _ := q.Get(sub.ID)
	if j.State != api.JobSuccess || j.EnvKey != "s1-parked" || j.Instance != "i1" {
		t.Fatalf("after reconciling the job is %s (%s) env_key=%q instance=%q; want success with key s1-parked on i1", j.State, j.Reason, j.EnvKey, j.Instance)
	}
	if _, err := q.SubmitAs(api.Principal{Name: "alice"}, api.JobRequest{Script: "true", Resume: "s1-parked"}); err != nil {
		t.Errorf("the job's submitter cannot resume the recovered key: %v", err)
	}
	if _, err := q.SubmitAs(api.Principal{Name: "mallory"}, api.JobRequest{Script: "true", Resume: "s1-parked"}); err == nil {
		t.Error("another submitter may resume the recovered key")
	}
	if len(q.Interrupted()) != 0 {
		t.Errorf("the recovered job is still listed as interrupted: %+v", q.Interrupted())
	}
}
