package scaler_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
)

// TestBookingRulesHold drives the core with random calls against a provider
// that lists what it was asked for, and checks the booking contract after
// every call: on-demand bookings never exceed what max_instances can hold,
// a preemptive booking is always on a ready slot, bookings never fail for
// accounting, and the fleet never exceeds max_instances.
func TestBookingRulesHold(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 3).Draw(t, "capacity")
		maxInst := rapid.IntRange(1, 5).Draw(t, "max")
		preemptive := rapid.Bool().Draw(t, "preemptive")
		idle := rapid.IntRange(0, 3).Draw(t, "idle")
		if preemptive && idle == 0 {
			idle = 1 // config refuses preemptive mode without an idle pool
		}
		now := time.Unix(0, 0)
		s := scaler.New(scaler.Config{CapacityPerInstance: capacity, MaxInstances: maxInst,
			Policies: scaler.FixedPolicy(policy.Policy{IdleCount: idle, IdleTime: time.Minute, Preemptive: preemptive})}, now)

		var listed []scaler.Listed // the provider's instances
		nextID := 0
		held := map[string]bool{} // key → acquired
		keys := 0
		carryOut := func() {
			actions, _ := s.Ready()
			for _, a := range actions {
				switch a := a.(type) {
				case scaler.Increase:
					for range a.N {
						nextID++
						listed = append(listed, scaler.Listed{ID: fmt.Sprintf("i%d", nextID), State: provider.StateRunning})
					}
					s.IncreaseResult(a.N, a.N, nil)
				case scaler.Decrease:
					if a.Reason == "" {
						t.Fatalf("deletion of %s without a reason", a.ID)
					}
					for i, l := range listed {
						if l.ID == a.ID {
							listed = append(listed[:i], listed[i+1:]...)
							break
						}
					}
				case scaler.Lost, scaler.Failed:
					t.Fatalf("%#v with a provider that never fails", a)
				}
			}
			if len(listed) > maxInst {
				t.Fatalf("%d instances, max_instances %d", len(listed), maxInst)
			}
		}
		for range rapid.IntRange(1, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0:
				keys++
				k := fmt.Sprintf("k%d", keys)
				if err := s.Reserve(k); err != nil {
					if !errors.Is(err, scaler.ErrNoCapacity) {
						t.Fatalf("reserve: %v, want only a typed no-capacity refusal", err)
					}
					continue
				}
				held[k] = false
				if !preemptive && s.InUse() > maxInst*capacity {
					t.Fatalf("on-demand booked %d slots, max_instances × capacity is %d", s.InUse(), maxInst*capacity)
				}
				if preemptive {
					if _, ok, _ := s.Acquire(k); !ok {
						t.Fatalf("preemptive booking %s is not on a ready slot", k)
					}
					held[k] = true
				}
			case 1:
				for k, acq := range held {
					if _, ok, err := s.Acquire(k); err != nil {
						t.Fatal(err)
					} else if ok && !acq {
						held[k] = true
					}
					break
				}
			case 2:
				for k, acq := range held {
					var err error
					if acq {
						err = s.Release(k)
					} else {
						err = s.Unreserve(k)
					}
					if err != nil {
						t.Fatalf("give back %s: %v", k, err)
					}
					delete(held, k)
					break
				}
			case 3:
				s.Observe(append([]scaler.Listed(nil), listed...))
			case 4:
				now = now.Add(time.Duration(rapid.IntRange(1, 120).Draw(t, "secs")) * time.Second)
				s.Advance(now)
				s.Tick()
			case 5:
				s.Observe(append([]scaler.Listed(nil), listed...))
				now = now.Add(time.Second)
				s.Advance(now)
				s.Tick()
			}
			carryOut()
			if err := s.CheckForTest(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
