package fleet

import "github.com/berth-ci/berth/scaler"

// ReservePoll books capacity for a long-poll in flight; see
// scaler.Scaler.ReservePoll. Give it back with Unreserve when the poll
// returns nothing, or turn it into a booking with Promote when it returns a
// job.
func (f *Fleet) ReservePoll(key string) (err error) {
	if derr := f.do(func(c *scaler.Scaler) { err = c.ReservePoll(key) }); derr != nil {
		return derr
	}
	return err
}

// Promote turns key's poll booking into the booking of the job the poll
// returned; see scaler.Scaler.Promote.
func (f *Fleet) Promote(key string) (err error) {
	if derr := f.do(func(c *scaler.Scaler) { err = c.Promote(key) }); derr != nil {
		return derr
	}
	return err
}
