package ha

import (
	"fmt"

	"github.com/berth-ci/berth/store"
)

// etcd's revision only grows in one cluster's life. A response whose
// revision is below one this store saw comes from etcd restored from a
// snapshot or rolled back to an older copy of its data: the fleet's
// identity is there, but the state is the past (issue 43). A leader that
// went on would save over it from its memory while a later leader would
// load it, taking busy instances for idle. So the store refuses the
// moment it sees it: Leading (before every provider call and job start),
// Save and the identity check of each term return RolledBackError, which
// stops the fleet for good and ends the term; the job IDs each manager
// saw tell the same after a restart (queue.PastError).

// RolledBackError says that etcd answered at a revision below one this
// manager saw before.
type RolledBackError struct {
	// Prefix is the key prefix of the state.
	Prefix string
	// Seen is the highest revision this manager saw; Found etcd's now.
	Seen, Found int64
}

func (e *RolledBackError) Error() string {
	return fmt.Sprintf("etcd holds the fleet's state from the past: its revision went back from %d to %d, so etcd was restored from a snapshot or rolled back; "+
		"jobs started since are not in it and instances it records idle may still run them. "+
		"This manager refuses to lead rather than book new jobs beside them: stop every manager, run `berth state accept-restore --config FILE` on each manager's host "+
		"(it fails the jobs the snapshot cannot account for and makes every instance unknown, to be reset or replaced before any job), then start the managers",
		e.Seen, e.Found)
}

// Is makes errors.Is(err, store.ErrFenced) hold: the fleet stops for good
// and the term ends, as when another manager took over.
func (e *RolledBackError) Is(target error) bool { return target == store.ErrFenced }

// noteRevision records a response's revision and returns RolledBackError
// when it is below before, the highest revision seen when the request was
// sent. Only that is a rollback: a request that ran concurrently with a
// write may be answered at a revision below the write's (seen since), and
// that says nothing about etcd's past.
func (s *Store) noteRevision(before, rev int64) error {
	if rev < before {
		return &RolledBackError{Prefix: s.prefix, Seen: before, Found: rev}
	}
	for {
		seen := s.seenRev.Load()
		if rev <= seen || s.seenRev.CompareAndSwap(seen, rev) {
			return nil
		}
	}
}
