package scaler

import (
	"fmt"
)

// InUse returns reserved + acquired slots, the demand that needs running instances.
func (s *Scaler) InUse() int { return len(s.res) }

func (s *Scaler) heldInstances() int {
	return s.byPhase[phaseSuspendWait] + s.byPhase[phaseSuspending] + s.byPhase[phaseSuspended] - s.pooled
}

// Reserve books a slot for key. It fails with a *NoCapacityError when no slot
// can be guaranteed; the caller must then not take a job.
func (s *Scaler) Reserve(key string) error {
	if s.booked(key) {
		return fmt.Errorf("reserve %q: %w", key, ErrDuplicateKey)
	}
	p := s.policy()
	if p.Preemptive {
		if len(s.free) == 0 {
			return s.refuse("no_idle_slot", fmt.Sprintf(
				"preemptive mode books only idle slots on ready instances; in_use=%d ready=%d", len(s.res), s.byPhase[phaseReady]))
		}
	} else {
		if err := s.underMax(); err != nil {
			return err
		}
	}
	s.granted++
	if s.queued > 0 {
		// The booking is for one of the jobs the source reported queued:
		// count it once, as a booking, until the source reports again.
		s.queued--
	}
	s.addReservation(key)
	return nil
}

// underMax refuses a booking in on-demand mode when the bookings and poll
// bookings already fill max_instances (less instances held by parked
// environments): every booking must be able to get a slot.
func (s *Scaler) underMax() error {
	limit := (s.cfg.MaxInstances - s.heldInstances()) * s.cfg.CapacityPerInstance
	if len(s.res)+len(s.polls) < limit {
		return nil
	}
	s.refused["max_instances"]++
	polls := ""
	if len(s.polls) > 0 {
		polls = fmt.Sprintf(" polls=%d", len(s.polls))
	}
	return &NoCapacityError{Reason: "max_instances", Detail: fmt.Sprintf(
		"in_use=%d%s limit=%d (max_instances=%d suspended=%d capacity_per_instance=%d)",
		len(s.res), polls, limit, s.cfg.MaxInstances, s.heldInstances(), s.cfg.CapacityPerInstance)}
}

// refuse counts and returns a refusal for want of an idle slot. A fleet
// at max_instances cannot start one, so that refusal is max_instances:
// the job waits for a slot to come free, not for an instance to boot (it
// is what an operator can act on: raise the limit).
func (s *Scaler) refuse(reason, detail string) error {
	if reason == "no_idle_slot" && s.Total() >= s.cfg.MaxInstances {
		reason = "max_instances"
		detail += fmt.Sprintf("; the fleet is at max_instances=%d (total=%d)", s.cfg.MaxInstances, s.Total())
	}
	s.refused[reason]++
	return &NoCapacityError{Reason: reason, Detail: detail}
}

// booked reports whether key holds a booking or a poll booking.
func (s *Scaler) booked(key string) bool {
	_, dup := s.res[key]
	return dup || s.polls[key]
}

// addReservation books a slot for key as demand: an idle slot when there is
// one, else a place in the queue, and scales up for it.
func (s *Scaler) addReservation(key string) {
	r := &reservation{key: key}
	s.res[key] = r
	if len(s.free) > 0 {
		s.bind(r, s.free[len(s.free)-1])
	} else {
		s.enqueue(r, false)
	}
	// Taking an idle slot lowers the idle pool: refill it in the same decision.
	s.scaleUp()
	s.dirty = true
}

// Unreserve gives a booking back: the job request returned nothing. The slot
// is idle again. It never creates or deletes an instance by itself.
func (s *Scaler) Unreserve(key string) error {
	if s.polls[key] {
		delete(s.polls, key)
		return nil
	}
	r, ok := s.res[key]
	if !ok {
		return fmt.Errorf("unreserve %q: %w", key, ErrUnknownKey)
	}
	s.dropReservation(r)
	return nil
}

func (s *Scaler) dropReservation(r *reservation) {
	delete(s.res, r.key)
	r.queued = false
	if r.env != nil {
		r.env.inUse = nil
		r.env = nil
	}
	if r.inst != nil {
		in := r.inst
		s.unbind(r)
		s.afterSlotFreed(in)
	}
	s.dirty = true
}

// Acquire binds key's booking to a slot on a ready instance. When it returns
// ok=false, the booking waits for an instance that is booting for it; a Bound
// or Failed action for key follows later.
func (s *Scaler) Acquire(key string) (instanceID string, ok bool, err error) {
	r, found := s.res[key]
	if !found {
		return "", false, fmt.Errorf("acquire %q: %w", key, ErrUnknownKey)
	}
	if !r.arrived {
		// A job was taken for this booking: that is an arrival, what the
		// arrival model learns from (a booking given back unused is not).
		r.arrived = true
		if r.arrivedAt.IsZero() {
			r.arrivedAt = s.now // else its arrival in the source (ArrivedAt)
		}
		s.arr.record(s.now, 1)
		if r.inst != nil && r.env == nil {
			s.observeWait(s.now.Sub(r.arrivedAt)) // a slot at once
		}
	}
	if r.inst != nil && (r.env == nil || r.inst.phase == phaseReady) {
		if !r.acquired {
			r.acquired = true
			s.started(r)
			s.acquired++
			s.dirty = true
		}
		return r.inst.id, true, nil
	}
	r.waiting = true
	return "", false, nil
}

// Why explains why key's booking has no ready slot yet, for the error a user
// sees when an Acquire times out.
func (s *Scaler) Why(key string) string {
	r, ok := s.res[key]
	if !ok {
		return "the booking no longer exists"
	}
	var why string
	switch {
	case r.lost != "":
		why = r.lost
	case s.lastIncErr != "":
		why = "the provider failed to create instances: " + s.lastIncErr
	default:
		why = fmt.Sprintf("no instance became ready (creating=%d booting=%d pending=%d max_instances=%d)",
			s.byPhase[phaseCreating], s.byPhase[phaseBooting], len(s.pending), s.cfg.MaxInstances)
	}
	return why
}

// Release ends key's acquisition: the slot is idle again and the instance's
// use count goes up; at max_use_count the instance drains.
func (s *Scaler) Release(key string) error {
	r, ok := s.res[key]
	if !ok {
		return fmt.Errorf("release %q: %w", key, ErrUnknownKey)
	}
	if r.env != nil {
		// The resumed environment was used and given back: it is consumed.
		e := r.env
		e.inst.env = nil
		delete(s.envs, e.key)
		r.env = nil
	}
	if in := r.inst; in != nil && r.acquired {
		in.useCount++
		s.arr.release(s.now)
		if !r.startedAt.IsZero() {
			s.runs.add(s.now.Sub(r.startedAt))
		}
	}
	s.dropReservation(r)
	return nil
}

// afterSlotFreed decides what a freed slot means for its instance.
func (s *Scaler) afterSlotFreed(in *instance) {
	switch in.phase {
	case phaseReady:
		if s.cfg.MaxUseCount > 0 && in.useCount >= s.cfg.MaxUseCount {
			s.setPhase(in, phaseDraining)
			in.deleteReason = ReasonMaxUse
			// Bookings that have not started would push the instance past
			// max_use_count: move them to another slot or a new instance.
			s.parkOthers(in)
			s.bindQueued()
			s.scaleUp()
		} else {
			s.bindQueued()
		}
	case phaseSuspendWait:
		if in.used == 0 {
			s.issueSuspend(in)
		}
	}
	if in.phase == phaseDraining && in.used == 0 {
		s.deleteInstance(in, in.deleteReason)
	}
}
