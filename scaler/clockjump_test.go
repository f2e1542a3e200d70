package scaler

import (
	"testing"
	"time"
)

// Issue 19: a wall-clock jump of a week must not expire every parked
// environment at once; the jump ages them by MaxClockStep only.
func TestClockJumpDoesNotExpireEveryParkedEnvironment(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, bound := range []time.Duration{0, time.Minute} {
		s := New(Config{CapacityPerInstance: 1, MaxInstances: 3, CanSuspend: true, EnvTTL: 24 * time.Hour, MaxClockStep: bound}, t0)
		s.envs["e1"] = &env{key: "e1", parkedAt: t0}
		s.envs["e2"] = &env{key: "e2", parkedAt: t0.Add(-24*time.Hour + 30*time.Second)}
		s.Advance(t0.Add(7 * 24 * time.Hour)) // the clock jumps a week
		s.Tick()
		_, e1 := s.envs["e1"]
		_, e2 := s.envs["e2"]
		switch {
		case bound == 0 && (e1 || e2):
			t.Errorf("without a bound the week-long jump kept e1=%v e2=%v; the test no longer shows the failure", e1, e2)
		case bound > 0 && (!e1 || e2):
			t.Errorf("with MaxClockStep %v: e1 kept=%v (want true), e2 kept=%v (want false: its TTL ended within the bound)", bound, e1, e2)
		}
		if bound > 0 && s.ClockJumps() != 1 {
			t.Errorf("ClockJumps = %d, want 1", s.ClockJumps())
		}
	}
}
