package scaler

import (
	"fmt"
	"time"
)

// Moved tells the holder of an acquisition that its instance went before
// its job reached it (Config.ConfirmConnect): the booking waits for
// another slot, and a Bound for Key follows. The job ran nothing on From,
// so it is not lost; its holder fetches the new instance's connection
// details instead.
type Moved struct {
	Key    string
	From   string
	Reason string
}

// Connected records that key's job has the connection details of
// instance id and starts there: from now on, losing the instance loses
// the job (Lost). It returns ErrMoved when the booking no longer sits on
// id (the instance went while its details were being fetched: the caller
// acquires again), ErrUnknownKey when the booking is gone.
func (s *Scaler) Connected(key, id string) error {
	r, ok := s.res[key]
	if !ok {
		return fmt.Errorf("connected %q: %w", key, ErrUnknownKey)
	}
	if r.inst == nil || r.inst.id != id || !r.acquired {
		return fmt.Errorf("connected %q to %s: %w", key, id, ErrMoved)
	}
	r.connected = true
	return nil
}

// Holds reports whether key's booking is bound to instance id.
func (s *Scaler) Holds(key, id string) bool {
	r, ok := s.res[key]
	return ok && r.inst != nil && r.inst.id == id
}

// movable reports whether an acquisition may move off an instance that
// goes: its job has not reached the instance yet, and it resumes no
// environment (which lives on that instance alone).
func (s *Scaler) movable(r *reservation) bool {
	return s.cfg.ConfirmConnect && r.acquired && !r.connected && r.env == nil
}

// move takes an acquisition whose job has not reached instance in off it,
// and puts it at the front of the queue as a waiting acquisition: the next
// free slot binds it (Bound), and scale-up counts it as demand.
func (s *Scaler) move(r *reservation, in *instance, why string) {
	s.unbind(r)
	r.lost = why
	r.waiting = true
	// Its wait was learnt when it was first bound; a second sample would
	// count it twice (bindQueued learns none without an arrival time).
	r.arrivedAt = time.Time{}
	s.enqueue(r, true)
	s.emit(Moved{Key: r.key, From: in.id, Reason: why})
}

// Going records what a provider call said about instance id between two
// listings: the cloud is deleting it (provider.ErrInstanceGoing, such as
// "shutting-down, not running" from AWS). The instance is then treated as
// a listing saying StateDeleting would have it: no booking goes there any
// more, and the bookings whose jobs have not reached it move.
func (s *Scaler) Going(id, why string) {
	in, ok := s.instances[id]
	if !ok || in.phase == phaseRestored {
		return
	}
	s.going(in, fmt.Sprintf("instance %s: %s", id, why))
	s.bindQueued()
	s.scaleUp()
}

// going takes an instance the provider is deleting out of service.
func (s *Scaler) going(in *instance, why string) {
	if in.phase == phaseDeleting {
		return
	}
	s.evict(in, why)
	in.deleteReason = ReasonRemovedByProvider
	s.setPhase(in, phaseDeleting)
}
