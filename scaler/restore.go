package scaler

import (
	"fmt"
	"time"

	"github.com/berth-ci/berth/provider"
)

// reconcile decides the fate of an instance loaded from the store, from its
// first listing after a restart (docs/semantics.md, "Restart").
func (s *Scaler) reconcile(in *instance, st provider.State) {
	e := in.env
	switch st {
	case provider.StateDeleted:
		s.vanished(in)
		return
	case provider.StateDeleting:
		// Still listed, so still counting against max_instances until it is
		// gone: keep it as deleting rather than forgetting it (I3, I4).
		if in.restoredFrom != phaseDeleting {
			s.evict(in, fmt.Sprintf("instance %s is being deleted by the provider", in.id))
			in.deleteReason = ReasonRemovedByProvider
		}
		in.nextDecrease = s.now.Add(30 * time.Second)
		s.setPhase(in, phaseDeleting)
		return
	}
	if in.restoredFrom == phaseDeleting && st != provider.StateTimeout {
		// The deletion was decided and recorded before the restart; carry it
		// out whatever state the instance has reached, so it cannot leak.
		s.setPhase(in, phaseBooting)
		s.evict(in, fmt.Sprintf("instance %s was being deleted (%s)", in.id, in.deleteReason))
		s.deleteInstance(in, in.deleteReason)
		return
	}
	switch st {
	case provider.StateTimeout:
		s.setPhase(in, phaseBooting)
		s.failInstance(in, ReasonProviderTimeout, "the provider reported a timeout")
	case provider.StateCreating:
		s.setPhase(in, phaseCreating)
	case provider.StateRunning:
		switch {
		case e != nil:
			// The environment's job died, or the suspend had not started: park it.
			s.setPhase(in, phaseSuspendWait)
			s.issueSuspend(in)
		case in.needsReset:
			// Its reset had not finished when berth stopped.
			s.startReset(in)
		case in.restoredFrom == phaseCreating || in.restoredFrom == phaseBooting:
			s.setPhase(in, phaseCreating)
			s.observeOne(in, st)
		default:
			s.makeReady(in)
			if in.restoredFrom == phaseDraining {
				s.afterSlotFreed(in)
			}
		}
	case provider.StateSuspending:
		s.setPhase(in, phaseSuspending)
	case provider.StateSuspended:
		s.setPhase(in, phaseSuspended)
		switch {
		case e == nil:
			s.unclaimed(in)
		case e.inUse != nil:
			// Resume was called before this first listing, while the
			// instance was only "restored": issue the resume now, or the
			// booking would wait for ever.
			s.setPhase(in, phaseResuming)
			s.emit(Resume{ID: in.id})
		}
	case provider.StateResuming:
		s.setPhase(in, phaseResuming)
	}
}

// deleteUnclaimedNow deletes a suspended instance that holds no environment
// at once when idle_time is 0 (docs/semantics.md, "Restart"), instead of waiting for
// the next Tick.
func (s *Scaler) deleteUnclaimedNow(in *instance) {
	if in.env == nil && s.policy().IdleTime <= 0 {
		s.deleteInstance(in, ReasonUnclaimed)
	}
}

// adopt accounts for an instance the core did not know.
func (s *Scaler) adopt(l Listed) {
	switch l.State {
	case provider.StateDeleted:
		return // gone; nothing to account for
	case provider.StateDeleting:
		// Going away, but it counts against max_instances until it is gone
		// (I3): track it as deleting.
		in := s.addInstance(l.ID, phaseDeleting)
		in.provState = l.State
		in.deleteReason = ReasonUnknown
		in.nextDecrease = s.now.Add(30 * time.Second)
		return
	}
	fromRequest := len(s.pending) > 0 && (l.State == provider.StateCreating || l.State == provider.StateRunning)
	var requested time.Time
	if fromRequest {
		requested = s.takePending()
	} else if s.cfg.DeleteUnknown {
		in := s.addInstance(l.ID, phaseBooting)
		in.provState = l.State
		s.deleteInstance(in, ReasonUnknown)
		return
	} else if s.replaceUnknown(l) {
		return
	}
	var in *instance
	switch l.State {
	case provider.StateSuspended, provider.StateSuspending:
		in = s.addInstance(l.ID, phaseSuspending)
		if l.State == provider.StateSuspended {
			s.setPhase(in, phaseSuspended)
			s.unclaimed(in)
		}
	case provider.StateResuming:
		in = s.addInstance(l.ID, phaseResuming)
	case provider.StateTimeout:
		in = s.addInstance(l.ID, phaseBooting)
		s.failInstance(in, ReasonProviderTimeout, "the provider reported a timeout")
	default:
		in = s.addInstance(l.ID, phaseCreating)
		in.requested = requested
		if !fromRequest && l.State == provider.StateRunning {
			s.adoptRunning(in)
			return
		}
		s.observeOne(in, l.State)
	}
	in.provState = l.State
}
