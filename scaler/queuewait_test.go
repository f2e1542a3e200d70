package scaler

import (
	"errors"
	"testing"
	"time"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
)

// In preemptive mode a job finds its slot at its Acquire: the wait it had
// was in the source's queue. Reported with ArrivedAt, a job that waited a
// minute there is a miss for the refill controller (its trust falls); one
// that did not is a hit (it rises). Without ArrivedAt both were hits.
func TestArrivedAtSteersTheRefillWithTheQueueWait(t *testing.T) {
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	s := New(Config{MaxInstances: 4, CapacityPerInstance: 1, CanSuspend: true, SuspendedCost: 0.1,
		Policies: FixedPolicy(policy.Policy{IdleCount: 2, IdleTime: time.Hour, Preemptive: true,
			TargetWait: 15 * time.Second})}, now)
	s.Tick()
	s.IncreaseResult(2, 2, nil)
	s.Observe([]Listed{{ID: "i1", State: provider.StateRunning}, {ID: "i2", State: provider.StateRunning}})
	if err := s.ArrivedAt("nobody", now); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("ArrivedAt of no booking: %v, want ErrUnknownKey", err)
	}
	trust := s.arr.trust
	if err := s.Reserve("late"); err != nil {
		t.Fatal(err)
	}
	if err := s.ArrivedAt("late", now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Acquire("late"); !ok || err != nil {
		t.Fatalf("acquire late: %v %v", ok, err)
	}
	if s.arr.trust >= trust {
		t.Fatalf("a job that waited a minute in the queue left the trust at %g (was %g)", s.arr.trust, trust)
	}
	trust = s.arr.trust
	if err := s.Reserve("prompt"); err != nil {
		t.Fatal(err)
	}
	if err := s.ArrivedAt("prompt", now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Acquire("prompt"); !ok || err != nil {
		t.Fatalf("acquire prompt: %v %v", ok, err)
	}
	if s.arr.trust <= trust {
		t.Fatalf("a job that waited a second left the trust at %g (was %g)", s.arr.trust, trust)
	}
}
