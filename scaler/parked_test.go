package scaler_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
)

// step drains the core's actions, as fleet does after each event.
func step(s *scaler.Scaler) []scaler.Action {
	acts, _ := s.Ready()
	return acts
}

// parkedAtLimit returns a core with max_instances = 1 whose one instance "a"
// holds the suspended environment "e1".
func parkedAtLimit(t *testing.T, evictAfter time.Duration) (*scaler.Scaler, time.Time) {
	t.Helper()
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	s := scaler.New(scaler.Config{MaxInstances: 1, CanSuspend: true, EnvEvictAfter: evictAfter,
		Policies: scaler.FixedPolicy(policy.Policy{IdleCount: 0, IdleTime: time.Minute})}, now)
	must(t, s.Reserve("k1"))
	s.IncreaseResult(1, 1, nil)
	s.Observe([]scaler.Listed{{ID: "a", State: provider.StateRunning}})
	if _, ok, err := s.Acquire("k1"); !ok || err != nil {
		t.Fatalf("acquire k1: ok=%v err=%v", ok, err)
	}
	must(t, s.Suspend("k1", "e1", []byte("st")))
	s.Observe([]scaler.Listed{{ID: "a", State: provider.StateSuspended}})
	step(s)
	return s, now
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestResumeNeedsNoBookingWhenParkedEnvironmentsHoldEveryInstance(t *testing.T) {
	s, _ := parkedAtLimit(t, 0)
	if err := s.Reserve("plain"); !errors.Is(err, scaler.ErrNoCapacity) {
		t.Fatalf("a plain booking with the only instance parked: %v, want no capacity", err)
	}
	if s.EnvBusy("e1") {
		t.Fatal("e1 reported busy before any job resumed it")
	}
	must(t, s.Resume("e1", "r1"))
	if !s.EnvBusy("e1") {
		t.Fatal("e1 not reported busy while r1 resumes it: a second resume job would be taken and fail")
	}
	s.ResumeResult("a", nil)
	s.Observe([]scaler.Listed{{ID: "a", State: provider.StateRunning}})
	var bound bool
	for _, a := range step(s) {
		if b, ok := a.(scaler.Bound); ok && b.Key == "r1" && b.InstanceID == "a" {
			bound = true
		}
	}
	if !bound {
		t.Fatal("the resume was not bound to the environment's own instance")
	}
}

func TestRefusedBookingEvictsTheLongestParkedEnvironmentAfterGrace(t *testing.T) {
	s, now := parkedAtLimit(t, 10*time.Minute)
	s.Advance(now.Add(9 * time.Minute))
	if err := s.Reserve("plain"); !errors.Is(err, scaler.ErrNoCapacity) {
		t.Fatalf("reserve: %v", err)
	}
	if s.RelieveParked() {
		t.Fatal("RelieveParked evicted before environment_evict_after")
	}
	for _, a := range step(s) {
		if _, ok := a.(scaler.Decrease); ok {
			t.Fatalf("evicted before environment_evict_after: %#v", a)
		}
	}

	s.Advance(now.Add(10 * time.Minute))
	if err := s.Reserve("plain"); !errors.Is(err, scaler.ErrNoCapacity) {
		t.Fatalf("reserve: %v", err)
	}
	if !s.RelieveParked() {
		t.Fatal("RelieveParked did not evict after environment_evict_after")
	}
	var evicted, deleted bool
	for _, a := range step(s) {
		switch a := a.(type) {
		case scaler.EnvEvicted:
			evicted = a.Key == "e1" && a.InstanceID == "a"
		case scaler.Decrease:
			deleted = a.ID == "a" && a.Reason == scaler.ReasonEnvEvicted
		}
	}
	if !evicted || !deleted {
		t.Fatalf("evicted=%v deleted=%v: want e1 evicted and instance a deleted with reason %s", evicted, deleted, scaler.ReasonEnvEvicted)
	}
	var lost *scaler.EnvLostError
	if err := s.Resume("e1", "r1"); !errors.As(err, &lost) || !strings.Contains(err.Error(), "evicted") {
		t.Fatalf("resume of the evicted environment: %v; want an EnvLostError saying it was evicted", err)
	}

	// Once the instance is gone, the plain job gets a new one.
	s.DecreaseResult([]string{"a"}, nil)
	s.Observe(nil)
	step(s)
	must(t, s.Reserve("plain"))
}

func TestNoEvictionWhileAnInstanceIsFreeForPlainJobs(t *testing.T) {
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	s := scaler.New(scaler.Config{MaxInstances: 2, CanSuspend: true, EnvEvictAfter: time.Minute,
		Policies: scaler.FixedPolicy(policy.Policy{IdleCount: 0, IdleTime: time.Minute})}, now)
	must(t, s.Reserve("k1"))
	must(t, s.Reserve("k2"))
	s.IncreaseResult(2, 2, nil)
	s.Observe([]scaler.Listed{{ID: "a", State: provider.StateRunning}, {ID: "b", State: provider.StateRunning}})
	s.Acquire("k1")
	s.Acquire("k2")
	must(t, s.Suspend("k1", "e1", nil))
	step(s)
	s.Advance(now.Add(time.Hour))
	// k2 still runs on the other instance: that instance will be free, so waiting is enough.
	if err := s.Reserve("plain"); !errors.Is(err, scaler.ErrNoCapacity) {
		t.Fatalf("reserve: %v", err)
	}
	if s.RelieveParked() {
		t.Fatal("RelieveParked evicted although an instance not holding an environment exists")
	}
	for _, a := range step(s) {
		if _, ok := a.(scaler.EnvEvicted); ok {
			t.Fatal("evicted an environment although an instance not holding one exists")
		}
	}
}

func TestShutdownStopsScaleUp(t *testing.T) {
	now := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	s := scaler.New(scaler.Config{MaxInstances: 3,
		Policies: scaler.FixedPolicy(policy.Policy{IdleCount: 1, IdleTime: time.Minute, Preemptive: true})}, now)
	s.Tick()
	s.IncreaseResult(1, 1, nil)
	s.Observe([]scaler.Listed{{ID: "a", State: provider.StateRunning}})
	step(s)
	s.Shutdown(scaler.ReasonShutdown)
	s.DecreaseResult([]string{"a"}, nil)
	s.Observe(nil)
	s.Advance(now.Add(time.Minute))
	s.Tick()
	for _, a := range step(s) {
		if inc, ok := a.(scaler.Increase); ok {
			t.Fatalf("after Shutdown the core asked for %d instances: the idle pool was refilled and would leak at exit", inc.N)
		}
	}
}
