package scaler

import "fmt"

// ReasonResetFailed deletes an instance whose reset between jobs did not
// succeed: what the last job left there must reach no other job.
const ReasonResetFailed Reason = "reset_failed"

// Discard ends key's acquisition like Release, but the instance takes no
// other job: it drains and is deleted once its slots are free. The manager
// calls it when the reset between jobs failed or timed out, whatever the
// provider did about it (issue 19): a hung plugin cannot say whether the
// reset happened, so the instance is not trusted with another job.
// Bookings bound to the instance that have not started move elsewhere.
func (s *Scaler) Discard(key, why string) error {
	r, ok := s.res[key]
	if !ok {
		return fmt.Errorf("discard %q: %w", key, ErrUnknownKey)
	}
	if in := r.inst; in != nil && in.phase != phaseDeleting {
		in.lastErr = why
		in.deleteReason = ReasonResetFailed
		if in.phase != phaseDraining {
			s.setPhase(in, phaseDraining)
		}
		s.parkOthers(in)
		s.bindQueued()
		s.scaleUp()
	}
	return s.Release(key)
}

// DiscardInstance takes an instance that holds no acquisition out of
// service and deletes it, for a reset that failed outside any job (the
// instance of a job that died with the previous berth). Unstarted bookings
// bound to it move elsewhere.
func (s *Scaler) DiscardInstance(id, why string) {
	in, ok := s.instances[id]
	if !ok || in.phase == phaseDeleting {
		return
	}
	s.failInstance(in, ReasonResetFailed, why)
}
