package scaler

import (
	"fmt"
	"time"
)

// Increases restored from the store were decided by a previous process (a
// leader killed during scale-up, a kill -9 right after "scale up"): some
// reached the provider, some never did. Each counts toward max_instances
// until its instance is listed or ListingTimeout (instance_acquire_timeout,
// 15 min) passes, so the phantoms stalled a full fleet for that long with
// nothing starting (issue 43). They are settled by what the provider says
// it was asked for (ObserveRequested, the clouds' target size) or, for a
// provider that cannot say, written off RestoredListingTimeout after the
// first listing of this process if no listed instance took them.

// RestoredListingTimeout bounds how long an increase restored from the
// store may stay missing from the listings after this process's first
// listing, when the provider cannot say what it was asked for: an increase
// that reached the provider shows as a creating instance within seconds
// to a minute; one lost with the previous process never does.
const RestoredListingTimeout = 2 * time.Minute

// PendingWrittenOff reports increases restored from the store that no
// instance will answer, dropped so that they no longer count toward
// max_instances.
type PendingWrittenOff struct {
	// N is how many were dropped; Left how many increases still pend.
	N, Left int
	// Why says what showed them to be phantoms.
	Why string
}

func (PendingWrittenOff) isAction() {}

// takePending takes the oldest pending increase for an instance listed
// now, and returns its request time.
func (s *Scaler) takePending() time.Time {
	t := s.pending[0]
	s.pending = s.pending[1:]
	s.restoredPending = max(s.restoredPending-1, 0)
	return t
}

// ObserveRequested feeds the core what the provider says it was asked for
// in all (a GCP group's target size, an AWS group's desired capacity, an
// Azure scale set's capacity), read right after a listing: the instances
// that count toward it and are not listed yet are coming. Restored
// increases beyond those never reached the provider and are dropped; the
// others are real and keep ListingTimeout.
func (s *Scaler) ObserveRequested(n int) {
	if s.restoredPending == 0 {
		return
	}
	listed := 0
	for _, in := range s.instances {
		if in.phase != phaseDeleting {
			listed++
		}
	}
	coming := max(n-listed, 0)
	if drop := min(len(s.pending)-coming, s.restoredPending); drop > 0 {
		s.dropRestored(drop, fmt.Sprintf("the provider was asked for %d instances and lists %d, so %d of the %d increases pending are coming", n, listed, coming, len(s.pending)))
	}
	s.restoredPending = 0
	s.scaleUp()
}

// expireRestored writes off the restored increases still missing
// RestoredListingTimeout after the first listing of this process.
func (s *Scaler) expireRestored() {
	if s.restoredPending == 0 || s.restoredSince.IsZero() {
		return
	}
	bound := min(RestoredListingTimeout, s.cfg.ListingTimeout)
	if s.now.Sub(s.restoredSince) < bound {
		return
	}
	s.dropRestored(s.restoredPending, fmt.Sprintf("no listing showed their instances within %s of the first listing since the restart", bound))
}

// dropRestored drops n of the restored increases, the oldest first.
func (s *Scaler) dropRestored(n int, why string) {
	s.pending = s.pending[n:]
	s.restoredPending -= n
	s.dirty = true
	s.lastIncErr = "increases restored from the previous process written off: " + why
	s.emit(PendingWrittenOff{N: n, Left: len(s.pending), Why: why})
}
