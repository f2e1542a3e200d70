package fleet

import "github.com/berth-ci/berth/scaler"

// ReserveBatch books a slot for each key in order, as Reserve does, under
// one lock and with one save of the state for all of them: the job loop of
// the built-in queue books a burst of queued jobs at once instead of paying
// a state.db commit per job (issue 23). It stops at the first refusal and
// returns how many keys it booked (the first n) and that error.
func (f *Fleet) ReserveBatch(keys []string) (n int, err error) {
	if derr := f.do(func(c *scaler.Scaler) {
		for _, k := range keys {
			if err = c.Reserve(k); err != nil {
				return
			}
			n++
		}
	}); derr != nil {
		return 0, derr // nothing of it was saved
	}
	return n, err
}

// UnreserveBatch gives bookings back, as Unreserve does, with one save.
// It goes on past a key it cannot give back and returns the first error.
func (f *Fleet) UnreserveBatch(keys []string) (err error) {
	if len(keys) == 0 {
		return nil
	}
	if derr := f.do(func(c *scaler.Scaler) {
		for _, k := range keys {
			if e := c.Unreserve(k); e != nil && err == nil {
				err = e
			}
		}
	}); derr != nil {
		return derr
	}
	return err
}
