package scaler_test

import (
	"testing"
	"time"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
)

// berth_instance_time_to_ready_seconds says "from request": an instance
// requested at 0, listed creating at 40 s and running at 60 s is ready 60 s
// after its request, and 20 s after its first listing.
func TestInstanceReadyMeasuresFromTheRequest(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	s := scaler.New(scaler.Config{CapacityPerInstance: 1, MaxInstances: 2,
		Policies: scaler.FixedPolicy(policy.Policy{IdleCount: 1, IdleTime: 20 * time.Minute, Preemptive: true})}, t0)
	s.Tick()
	s.Ready()
	s.IncreaseResult(1, 1, nil)
	s.Advance(t0.Add(40 * time.Second))
	s.Observe([]scaler.Listed{{ID: "a", State: provider.StateCreating}})
	s.Advance(t0.Add(60 * time.Second))
	s.Observe([]scaler.Listed{{ID: "a", State: provider.StateRunning}})
	actions, _ := s.Ready()
	for _, a := range actions {
		if r, ok := a.(scaler.InstanceReady); ok {
			if r.SinceRequest != 60*time.Second || r.After != 20*time.Second {
				t.Errorf("InstanceReady = %+v; want SinceRequest 60s, After 20s", r)
			}
			return
		}
	}
	t.Fatalf("no InstanceReady in %v", actions)
}
