package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berth-ci/berth/store"
)

// ErrStopped is returned by every call of a fleet that stopped acting
// because this manager no longer leads: a save was refused with
// store.ErrFenced, or the store said so right before a provider call. The
// error also matches the store's refusal (errors.Is(err, store.ErrFenced)).
// Nothing the call asked for was saved or done; the new leader owns the
// fleet now, and running jobs are left alone.
var ErrStopped = errors.New("the fleet stopped acting: this manager no longer leads (another manager took over, or its term ended); nothing was booked, changed or called")

// confirmRetry is how long a provider call waits before asking the store
// again whether this manager still leads, when the store could not tell
// (etcd unreachable). The term ends within the lease if that lasts, which
// turns the answer into a refusal.
const confirmRetry = 200 * time.Millisecond

// Fenced returns a channel closed once the fleet stopped acting for good
// because this manager no longer leads; Err then says why. The manager ends
// its term on it.
func (f *Fleet) Fenced() <-chan struct{} { return f.stopped }

// Err returns why the fleet stopped acting (matching ErrStopped and
// store.ErrFenced), or nil while it acts.
func (f *Fleet) Err() error {
	select {
	case <-f.stopped:
		return f.stopErr // written before stopped was closed
	default:
		return nil
	}
}

// stopLocked stops the fleet for good after cause, a refusal matching
// store.ErrFenced: nothing is dispatched any more, waiting Acquire and
// Resume calls fail, the loops of Run end. Provider calls already running
// finish, and their results are dropped. Called under the lock.
func (f *Fleet) stopLocked(cause error) {
	if f.stopErr != nil {
		return
	}
	f.stopErr = fmt.Errorf("%w: %w", ErrStopped, cause)
	f.log.Error("this manager no longer leads: the fleet makes no provider call any more; running jobs go on, the new leader owns the fleet",
		"err", cause, "waiting", len(f.waiters))
	for k, ch := range f.waiters {
		delete(f.waiters, k)
		ch <- result{err: f.stopErr}
	}
	close(f.changed) // callers waiting for a slot try again and learn it; it stays closed
	close(f.stopped)
}

// Stop stops the fleet for good, as a refused save does, for a manager
// that learned first that its term ended (its lease is gone, it resigned):
// no provider call is made after Stop returns, except those already in
// the provider. cause says why; the fleet's errors wrap it and match
// store.ErrFenced and ErrStopped.
func (f *Fleet) Stop(cause error) {
	if !errors.Is(cause, store.ErrFenced) {
		cause = fmt.Errorf("%w: %w", store.ErrFenced, cause)
	}
	f.stop(cause)
}

// stop is stopLocked for a caller that does not hold the lock.
func (f *Fleet) stop(cause error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopLocked(cause)
}

// confirm runs right before a provider call: a call is made only while this
// manager still leads, even when the save that recorded its intent came
// long before (a pause between the save and the call). It returns nil to
// go on, ErrStopped once the fleet stopped, or the store's error when it
// could not tell until ctx ended (the call then fails with it).
func (f *Fleet) confirm(ctx context.Context) error {
	if err := f.Err(); err != nil {
		return err
	}
	if f.leader == nil {
		return nil
	}
	for tries := 0; ; tries++ {
		err := f.leader.Leading()
		switch {
		case err == nil:
			if tries > 0 {
				f.log.Info("leadership confirmed; making the provider call held", "waited_tries", tries)
			}
			return nil
		case errors.Is(err, store.ErrFenced):
			f.stop(err)
			return f.Err()
		}
		if tries == 0 {
			f.log.Warn("cannot confirm that this manager still leads; holding the provider call until it can",
				"err", err, "retry_every", confirmRetry)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("provider call not made: %w", err)
		case <-f.stopped:
			return f.Err()
		case <-time.After(confirmRetry):
		}
	}
}
