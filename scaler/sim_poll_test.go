package scaler_test

import (
	"errors"

	"github.com/berth-ci/berth/scaler"
)

// pollStep plays the job loops of a long-polling source (GitLab): some polls
// book, some polls in flight return a job (Promote, then the job is taken as
// any other) and some return nothing (Unreserve). It checks the poll rule of
// docs/semantics.md: booking or giving back a poll never makes the core
// decide anything (no scale-up, no scale-in), and a poll's job always gets a
// booking.
func (w *world) pollStep() {
	for n := w.rng.IntN(3); n > 0; n-- {
		k := w.newKey()
		if err := w.s.ReservePoll(k); err != nil {
			if !errors.Is(err, scaler.ErrNoCapacity) {
				w.errorf("ReservePoll(%s) failed with an untyped error: %v", k, err)
			}
			continue
		}
		w.logf("poll %s", k)
		w.pollDecidesNothing("ReservePoll " + k)
		w.polls = append(w.polls, k)
	}
	for i := 0; i < len(w.polls); i++ {
		k := w.polls[i]
		switch w.rng.IntN(6) {
		case 0: // GitLab returned a job
			w.polls = append(w.polls[:i], w.polls[i+1:]...)
			i--
			w.logf("promote %s", k)
			if err := w.s.Promote(k); err != nil {
				w.errorf("Promote(%s) of a poll in flight: %v", k, err)
				continue
			}
			j := &job{key: k, state: jobBooked}
			w.jobs[k] = j
			w.apply()
			w.take(j)
		case 1: // the long-poll ended empty
			w.polls = append(w.polls[:i], w.polls[i+1:]...)
			i--
			w.logf("unpoll %s", k)
			if err := w.s.Unreserve(k); err != nil {
				w.errorf("Unreserve(%s) of a poll: %v", k, err)
			}
			w.pollDecidesNothing("Unreserve poll " + k)
		}
	}
}

// pollDecidesNothing checks that a poll booking moved nothing: no action, no
// state to persist.
func (w *world) pollDecidesNothing(what string) {
	acts, dirty := w.s.Ready()
	if len(acts) > 0 || dirty {
		w.errorf("%s made the core decide %d actions (dirty=%v): polls are not demand", what, len(acts), dirty)
	}
}
