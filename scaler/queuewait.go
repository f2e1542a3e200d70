package scaler

import (
	"fmt"
	"time"
)

// ArrivedAt tells the core when the job for key's booking arrived in its
// job source, before its first Acquire. The wait that steers the tier's
// refill (refill.go) then runs from there instead of from the Acquire. In
// preemptive mode a job is booked only onto an idle slot on a ready
// instance, so its whole wait is spent in the source's queue: measured
// from the Acquire every job found its slot at once, the controller saw
// only hits, trusted returns fully and rarely refilled the tier by boots
// (Travis week, preemptive: p95 60 s). A time after now counts as now; a
// key with no booking is an error.
func (s *Scaler) ArrivedAt(key string, at time.Time) error {
	r, ok := s.res[key]
	if !ok {
		return fmt.Errorf("arrived at %q: %w", key, ErrUnknownKey)
	}
	if !r.arrived && at.Before(s.now) {
		r.arrivedAt = at
	}
	return nil
}
