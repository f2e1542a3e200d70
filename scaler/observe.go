package scaler

import (
	"fmt"

	"github.com/berth-ci/berth/provider"
)

// Listed is one instance in a provider listing.
type Listed struct {
	ID    string
	State provider.State
}

// Observe feeds the core a complete provider listing (the result of Update).
// The first listing after Restore reconciles the store with the provider.
func (s *Scaler) Observe(listing []Listed) {
	if s.restoredPending > 0 && s.restoredSince.IsZero() {
		s.restoredSince = s.now
	}
	seen := make(map[string]struct{}, len(listing))
	var unknown []Listed
	for _, l := range listing {
		seen[l.ID] = struct{}{}
		in, ok := s.instances[l.ID]
		if !ok {
			unknown = append(unknown, l)
			continue
		}
		in.provState = l.State
		s.observeOne(in, l.State)
	}
	for _, in := range s.sortedInstances() {
		if _, ok := seen[in.id]; ok {
			continue
		}
		s.vanished(in)
	}
	for _, l := range unknown {
		s.adopt(l)
	}
	s.bindQueued()
	s.scaleUp()
}

// vanished handles an instance that the provider no longer lists.
func (s *Scaler) vanished(in *instance) {
	reason := in.deleteReason
	if in.phase != phaseDeleting {
		reason = ReasonRemovedByProvider
		why := fmt.Sprintf("instance %s is gone from the provider's listing (last state %q)", in.id, in.provState)
		if in.phase == phaseRestored {
			why = fmt.Sprintf("instance %s was removed while berth was not running", in.id)
		}
		s.evict(in, why)
	}
	s.removeInstance(in, reason)
}

func (s *Scaler) observeOne(in *instance, st provider.State) {
	if in.phase == phaseRestored {
		s.reconcile(in, st)
		return
	}
	switch st {
	case provider.StateDeleted:
		s.vanished(in)
	case provider.StateTimeout:
		if in.phase != phaseDeleting {
			s.failInstance(in, ReasonProviderTimeout, "the provider reported a timeout")
		}
	case provider.StateDeleting:
		s.going(in, fmt.Sprintf("instance %s is being deleted by the provider", in.id))
	case provider.StateRunning:
		switch in.phase {
		case phaseCreating:
			s.setPhase(in, phaseBooting)
			if s.cfg.ReadyHook {
				in.hookPending = true
				s.emit(RunReadyHook{ID: in.id})
			} else {
				s.makeReady(in)
			}
		case phaseResuming:
			s.finishResume(in)
		}
	case provider.StateSuspended:
		switch in.phase {
		case phaseSuspending, phaseSuspendWait:
			s.setPhase(in, phaseSuspended)
			if in.pooled {
				in.pooledAt = s.now
				return
			}
			if in.env == nil && in.unclaimedAt.IsZero() {
				s.unclaimed(in)
				return
			}
			if in.env != nil && in.env.inUse != nil {
				// A Resume arrived while the suspend was in progress.
				s.setPhase(in, phaseResuming)
				s.emit(Resume{ID: in.id})
			}
		}
	}
}
