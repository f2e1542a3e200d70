package scaler

import "fmt"

// Poll bookings. A source that long-polls for jobs (GitLab's POST
// /jobs/request) keeps request_concurrency polls in flight whether or not any
// job exists. Each poll must hold a booking, so that a job it returns has a
// slot (docs/failures.md, failure 1); but an idle GitLab must cost nothing,
// so a poll is never demand. Counting polls as demand kept one instance up
// per poll for ever (issue 17).
//
// The rule (docs/semantics.md, "Poll bookings"):
//   - on-demand mode: a poll books capacity under max_instances, counted with
//     the bookings, and starts nothing; an instance starts when the poll
//     returns a job (Promote);
//   - preemptive mode: a poll needs an idle slot on a ready instance, one the
//     policy keeps anyway; there are never more polls than such slots at
//     booking time;
//   - a poll holds no slot: it never makes the fleet grow, never stops an
//     idle instance from scaling in, and is not persisted (a poll does not
//     survive its process).

// ReservePoll books capacity for a long-poll in flight. It fails with a
// *NoCapacityError when a job the poll might return could not be given a
// slot; the caller must then not poll.
func (s *Scaler) ReservePoll(key string) error {
	if s.booked(key) {
		return fmt.Errorf("reserve poll %q: %w", key, ErrDuplicateKey)
	}
	if s.policy().Preemptive {
		if idle := s.idleSlots(); len(s.polls) >= idle {
			return s.refuse("no_idle_slot", fmt.Sprintf(
				"preemptive mode polls only on idle slots of ready instances; polls=%d idle_slots=%d ready=%d",
				len(s.polls), idle, s.byPhase[phaseReady]))
		}
	} else if err := s.underMax(); err != nil {
		return err
	}
	s.polls[key] = true
	s.granted++ // counted once: Promote keeps the same booking
	return nil
}

// Promote turns key's poll booking into a booking for the job the poll
// returned: from now on it is demand, takes an idle slot or waits for an
// instance started for it, and is acquired as any booking. It never fails for
// lack of capacity: the poll held it.
func (s *Scaler) Promote(key string) error {
	if !s.polls[key] {
		return fmt.Errorf("promote %q: %w", key, ErrUnknownKey)
	}
	delete(s.polls, key)
	s.addReservation(key)
	return nil
}

// Polls returns the number of poll bookings in flight.
func (s *Scaler) Polls() int { return len(s.polls) }

// idleSlots counts free slots on ready instances. It is O(instances with a
// free slot).
func (s *Scaler) idleSlots() int {
	n := 0
	for _, in := range s.free {
		n += in.freeSlots()
	}
	return n
}
