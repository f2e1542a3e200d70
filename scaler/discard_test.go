package scaler_test

import (
	"testing"
	"time"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
)

// Issue 19, failure 1, in the core: the job on the only instance ends and
// its reset failed. Discard deletes the instance (reason reset_failed); the
// next booking, waiting for a slot, is never bound to it, and gets a new
// instance once the old one is gone.
func TestDiscardedInstanceTakesNoOtherJob(t *testing.T) {
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	s := scaler.New(scaler.Config{MaxInstances: 1, CapacityPerInstance: 1,
		Policies: scaler.FixedPolicy(policy.Policy{IdleCount: 0, IdleTime: time.Minute})}, now)
	must(t, s.Reserve("a"))
	s.IncreaseResult(1, 1, nil)
	s.Observe([]scaler.Listed{{ID: "i1", State: provider.StateRunning}})
	if id, ok, err := s.Acquire("a"); !ok || err != nil || id != "i1" {
		t.Fatalf("acquire a: %s %v %v", id, ok, err)
	}
	step(s)
	must(t, s.Discard("a", "reset between jobs failed: timed out"))
	var deleted bool
	for _, a := range step(s) {
		if d, ok := a.(scaler.Decrease); ok && d.ID == "i1" && d.Reason == scaler.ReasonResetFailed {
			deleted = true
		}
	}
	if !deleted {
		t.Fatal("no Decrease of i1 with reason reset_failed")
	}
	must(t, s.Reserve("b"))
	if id, ok, _ := s.Acquire("b"); ok || id == "i1" {
		t.Fatalf("booking b got %q (ok=%v) on the discarded instance", id, ok)
	}
	s.Observe(nil) // the provider deleted i1
	s.Tick()
	var increase bool
	for _, a := range step(s) {
		if _, ok := a.(scaler.Increase); ok {
			increase = true
		}
	}
	if !increase {
		t.Error("no new instance asked for b once i1 was gone")
	}
	if err := s.CheckForTest(); err != nil {
		t.Error(err)
	}
}
