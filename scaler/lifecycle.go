package scaler

import (
	"fmt"
	"time"
)

// IncreaseResult reports how many of an Increase of requested instances the
// provider accepted.
func (s *Scaler) IncreaseResult(requested, created int, err error) {
	if created < requested {
		drop := requested - created
		if drop > len(s.pending) {
			drop = len(s.pending)
		}
		// Drop the newest requests: they are the ones this call made.
		s.pending = s.pending[:len(s.pending)-drop]
		s.restoredPending = min(s.restoredPending, len(s.pending))
		s.dirty = true
	}
	if err != nil {
		s.lastIncErr = err.Error()
	} else {
		s.lastIncErr = ""
	}
}

// IncreaseError is why the provider's last Increase failed, or why a
// request it accepted never appeared; "" once an Increase succeeded.
func (s *Scaler) IncreaseError() string { return s.lastIncErr }

// DecreaseResult reports which of the instances in a Decrease the provider accepted.
func (s *Scaler) DecreaseResult(ids []string, err error) {
	for _, id := range ids {
		if in, ok := s.instances[id]; ok && in.phase == phaseDeleting && err != nil {
			in.lastErr = err.Error()
			in.nextDecrease = s.now.Add(30 * time.Second)
		}
	}
}

// startReset holds in, found running with no record of what ran on it,
// until the caller reset it (Config.ResetAdopted); the need is saved with
// the instance, so a restart before the answer resets it again.
func (s *Scaler) startReset(in *instance) {
	in.needsReset = true
	s.dirty = true
	s.setPhase(in, phaseBooting)
	in.hookPending = true
	s.emit(RunReadyHook{ID: in.id, Reset: true})
}

// HookResult reports the outcome of RunReadyHook.
func (s *Scaler) HookResult(id string, err error) {
	in, ok := s.instances[id]
	if !ok || in.phase != phaseBooting {
		return
	}
	in.hookPending = false
	if in.needsReset {
		if err != nil {
			// Nothing says what the unknown job left there: delete it.
			s.failInstance(in, ReasonResetFailed, "reset of an instance found running with no record of it failed: "+err.Error())
			return
		}
		in.needsReset = false
		s.dirty = true
	}
	if err == nil {
		s.hookBackoff = 0
		s.makeReady(in)
		return
	}
	in.hookFails++
	in.lastErr = err.Error()
	if in.hookFails >= s.cfg.FailureThreshold {
		// Back off new instances too, so a broken hook does not churn the fleet.
		if s.hookBackoff == 0 {
			s.hookBackoff = 10 * time.Second
		} else if s.hookBackoff < 5*time.Minute {
			s.hookBackoff *= 2
		}
		s.hookPauseTo = s.now.Add(s.hookBackoff)
		s.failInstance(in, ReasonReadyHook, fmt.Sprintf("instance_ready_command failed %d times: %v", in.hookFails, err))
		return
	}
	in.nextHook = s.now.Add(backoff(in.hookFails))
}

// HeartbeatResult reports the outcome of a Heartbeat action.
func (s *Scaler) HeartbeatResult(id string, err error) {
	in, ok := s.instances[id]
	if !ok {
		return
	}
	in.hbInFlight = false
	if err == nil {
		in.hbFails = 0
		return
	}
	in.hbFails++
	in.lastErr = err.Error()
	if in.hbFails >= s.cfg.FailureThreshold && in.phase == phaseReady {
		s.failInstance(in, ReasonHeartbeat, fmt.Sprintf("heartbeat failed %d times: %v", in.hbFails, err))
	}
}

func backoff(fails int) time.Duration {
	d := time.Second << min(fails, 6)
	return min(d, time.Minute)
}

func (s *Scaler) makeReady(in *instance) {
	ready := InstanceReady{ID: in.id, After: s.now.Sub(in.created)}
	if !in.requested.IsZero() {
		ready.SinceRequest = s.now.Sub(in.requested)
	}
	s.emit(ready)
	if !in.requested.IsZero() {
		s.learnBoot(s.now.Sub(in.requested))
		in.requested = time.Time{}
	}
	in.readyAt = s.now
	in.idleSince = s.now
	in.nextHB = s.now.Add(s.cfg.HeartbeatInterval)
	s.setPhase(in, phaseReady)
	s.bindQueued()
}

// failInstance deletes an instance that cannot serve, moving its bookings elsewhere.
func (s *Scaler) failInstance(in *instance, reason Reason, why string) {
	in.lastErr = why
	s.evict(in, fmt.Sprintf("instance %s: %s", in.id, why))
	s.deleteInstance(in, reason)
}

// evict moves an instance's bookings away: unstarted ones go back to the
// front of the queue, running ones are lost, a parked environment is lost.
func (s *Scaler) evict(in *instance, why string) {
	for _, r := range in.slots {
		if r == nil {
			continue
		}
		if s.movable(r) {
			s.move(r, in, why)
			continue
		}
		if r.acquired {
			s.unbind(r)
			delete(s.res, r.key)
			s.emit(Lost{Key: r.key, InstanceID: in.id, Reason: why})
			continue
		}
		s.unbind(r)
		r.lost = why
		s.enqueue(r, true)
	}
	if e := in.env; e != nil {
		if r := e.inUse; r != nil && s.res[r.key] == r {
			delete(s.res, r.key)
			s.emit(Failed{Key: r.key, Err: &InstanceLostError{InstanceID: in.id, Reason: why}})
		}
		e.inUse = nil
		e.lost = why
		e.inst = nil
		in.env = nil
	}
	s.dirty = true
}

func (s *Scaler) deleteInstance(in *instance, reason Reason) {
	if in.phase == phaseDeleting {
		return
	}
	in.deleteReason = reason
	in.nextDecrease = s.now.Add(30 * time.Second)
	s.setPhase(in, phaseDeleting)
	s.emit(Decrease{ID: in.id, Reason: reason})
}
