package scaler

import (
	"fmt"
	"sort"
	"time"
)

// Tick runs the periodic work: scale-in, heartbeats, hook retries, timeouts,
// expiry of environments and of unclaimed suspended instances, and scale-up.
func (s *Scaler) Tick() {
	now := s.now
	p := s.policy()
	// Requests the provider never listed are written off.
	s.expireRestored()
	for len(s.pending) > 0 && now.Sub(s.pending[0]) >= s.cfg.ListingTimeout {
		s.takePending()
		s.lastIncErr = fmt.Sprintf("a requested instance did not appear in the provider's listing within %s", s.cfg.ListingTimeout)
		s.dirty = true
	}
	// A slot of the arrival profile that ended is worth persisting.
	if s.arr.roll(now); s.arr.changed {
		s.arr.changed = false
		s.dirty = true
	}
	// What the core learned beyond the profile, once a minute (learned.go).
	s.snapshotLearned(false)
	s.resize(p)
	var idle, pooled []*instance
	for _, in := range s.sortedInstances() {
		switch in.phase {
		case phaseCreating, phaseBooting:
			if now.Sub(in.created) >= s.cfg.ReadyTimeout {
				s.failInstance(in, ReasonNotReady, fmt.Sprintf("not ready within %s (last error: %s)", s.cfg.ReadyTimeout, orNone(in.lastErr)))
			} else if in.phase == phaseBooting && !in.hookPending && !in.nextHook.IsZero() && !now.Before(in.nextHook) {
				in.hookPending = true
				s.emit(RunReadyHook{ID: in.id, Reset: in.needsReset})
			}
		case phaseReady:
			if s.cfg.HeartbeatInterval > 0 && !in.hbInFlight && !now.Before(in.nextHB) {
				in.hbInFlight = true
				in.nextHB = now.Add(s.cfg.HeartbeatInterval)
				s.emit(Heartbeat{ID: in.id})
			}
			// A ready instance can still hold a parked environment (a resumed
			// booking given back unused); that slot is not idle (I5).
			if in.used == 0 && in.env == nil && now.Sub(in.idleSince) >= p.IdleTime {
				idle = append(idle, in)
			}
		case phaseSuspending:
			if !in.nextSuspend.IsZero() && !now.Before(in.nextSuspend) {
				s.issueSuspend(in)
			}
		case phaseSuspended:
			if in.pooled {
				pooled = append(pooled, in)
				continue
			}
			if in.env == nil && !in.unclaimedAt.IsZero() && now.Sub(in.unclaimedAt) >= p.IdleTime {
				s.deleteInstance(in, ReasonUnclaimed)
			}
		case phaseDeleting:
			if !now.Before(in.nextDecrease) {
				in.nextDecrease = now.Add(30 * time.Second)
				s.emit(Decrease{ID: in.id, Reason: in.deleteReason})
			}
		}
	}
	for _, k := range s.Environments() {
		e := s.envs[k]
		if e.inUse != nil || now.Sub(e.parkedAt) < s.cfg.EnvTTL {
			continue
		}
		delete(s.envs, k)
		s.dirty = true
		if in := e.inst; in != nil {
			in.env = nil
			if in.used > 0 {
				// Other slots still run jobs (capacity_per_instance > 1,
				// suspend_wait): drain, and delete once they are free (I5).
				in.deleteReason = ReasonEnvExpired
				s.setPhase(in, phaseDraining)
				s.parkOthers(in)
				continue
			}
			s.deleteInstance(in, ReasonEnvExpired)
		}
	}
	s.scaleIn(idle, p)
	s.expirePooled(pooled, p)
	s.scaleUp()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// sortedInstances returns the instances by ID, for decisions that must not
// depend on map order. The order is cached until an instance comes or goes,
// since Tick walks it every few seconds; callers must not modify it, and
// get a fresh one after they add or remove instances.
func (s *Scaler) sortedInstances() []*instance {
	if s.sortedOK {
		return s.sorted
	}
	out := make([]*instance, 0, len(s.instances))
	for _, in := range s.instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	s.sorted, s.sortedOK = out, true
	return out
}
