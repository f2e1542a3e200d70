package scaler

import "time"

// boundClockStep keeps a jump of the clock from aging parked environments
// by more than Config.MaxClockStep: their parking times move forward by the
// rest of the step, so that one jump cannot expire all of them at once.
// An environment is kept a little longer after a jump; none is lost.
func (s *Scaler) boundClockStep(step time.Duration) {
	if s.cfg.MaxClockStep <= 0 || step <= s.cfg.MaxClockStep {
		return
	}
	shift := step - s.cfg.MaxClockStep
	for _, e := range s.envs {
		e.parkedAt = e.parkedAt.Add(shift)
	}
	s.clockJumps++
	s.dirty = true
}

// ClockJumps counts the clock steps longer than Config.MaxClockStep seen
// since the core started, for the daemon's log and metrics.
func (s *Scaler) ClockJumps() int { return s.clockJumps }
