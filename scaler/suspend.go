package scaler

import (
	"fmt"
	"sort"
	"time"
)

// Suspend parks key's acquisition as environment envKey with its saved state.
// The instance takes no new bookings from now on, and is suspended once its
// other slots are free. The reservation for key ends.
func (s *Scaler) Suspend(key, envKey string, state []byte) error {
	r, ok := s.res[key]
	if !ok {
		return fmt.Errorf("suspend %q: %w", key, ErrUnknownKey)
	}
	if !r.acquired || r.inst == nil {
		return fmt.Errorf("suspend %q: %w", key, ErrNotAcquired)
	}
	if !s.cfg.CanSuspend {
		return fmt.Errorf("suspend %q: %w", key, ErrSuspendUnsupported)
	}
	if old, ok := s.envs[envKey]; ok && old != r.env {
		return fmt.Errorf("suspend %q: environment key %q is already in use", key, envKey)
	}
	in := r.inst
	if in.env != nil && in.env != r.env {
		// An instance is suspended whole and carries one environment; a
		// second Suspend would overwrite (and so lose) the first one.
		return fmt.Errorf("suspend %q: %w (environment %s)", key, ErrEnvSlotTaken, in.env.key)
	}
	slot := r.slot
	if r.env != nil {
		delete(s.envs, r.env.key)
		r.env = nil
		in.env = nil
	}
	in.useCount++
	delete(s.res, key)
	s.unbind(r)
	e := &env{key: envKey, inst: in, instID: in.id, slot: slot, state: state, parkedAt: s.now}
	in.env = e
	s.envs[envKey] = e
	s.parkOthers(in)
	s.setPhase(in, phaseSuspendWait)
	if in.used == 0 {
		s.issueSuspend(in)
	}
	s.scaleUp()
	s.dirty = true
	return nil
}

// parkOthers moves bookings that have not started off an instance that is
// about to be suspended.
func (s *Scaler) parkOthers(in *instance) {
	for _, o := range in.slots {
		if o != nil && !o.acquired {
			s.unbind(o)
			s.enqueue(o, true)
		}
	}
}

func (s *Scaler) issueSuspend(in *instance) {
	s.setPhase(in, phaseSuspending)
	in.nextSuspend = time.Time{}
	s.emit(Suspend{ID: in.id})
}

// SuspendResult reports the outcome of a Suspend action.
func (s *Scaler) SuspendResult(id string, err error) {
	in, ok := s.instances[id]
	if !ok || err == nil {
		return
	}
	in.suspendFails++
	in.lastErr = err.Error()
	if in.suspendFails >= s.cfg.FailureThreshold {
		s.failInstance(in, ReasonSuspendFailed, fmt.Sprintf("suspend failed %d times: %v", in.suspendFails, err))
		return
	}
	// Retry on a later tick.
	in.nextSuspend = s.now.Add(backoff(in.suspendFails))
}

// Resume resumes environment envKey for a new booking key. The result comes
// as a Bound (with the saved state) or Failed action for key. It fails at once
// when the environment is unknown or its instance is gone.
func (s *Scaler) Resume(envKey, key string) error {
	e, ok := s.envs[envKey]
	if !ok {
		return fmt.Errorf("resume %q: %w", envKey, ErrUnknownEnv)
	}
	if e.lost != "" {
		return &EnvLostError{Key: envKey, InstanceID: e.instID, Reason: e.lost}
	}
	if e.inUse != nil {
		return fmt.Errorf("resume %q: %w (job booking %s)", envKey, ErrEnvBusy, e.inUse.key)
	}
	if _, dup := s.res[key]; dup {
		return fmt.Errorf("resume %q as %q: %w", envKey, key, ErrDuplicateKey)
	}
	in := e.inst
	r := &reservation{key: key, inst: in, slot: e.slot, env: e, waiting: true}
	s.res[key] = r
	e.inUse = r
	if in.phase == phaseSuspended {
		s.setPhase(in, phaseResuming)
		s.emit(Resume{ID: in.id})
	}
	// In suspend_wait or suspending the resume is issued when the suspend
	// completes (see observeOne): a provider cannot do both at once.
	s.dirty = true
	return nil
}

// ResumeResult reports the outcome of a Resume action.
func (s *Scaler) ResumeResult(id string, err error) {
	in, ok := s.instances[id]
	if !ok || err == nil || in.phase != phaseResuming {
		return
	}
	if in.env == nil {
		s.resumeFailed(in, err)
		return
	}
	in.lastErr = err.Error()
	s.setPhase(in, phaseSuspended)
	if e := in.env; e != nil && e.inUse != nil {
		r := e.inUse
		e.inUse = nil
		r.env = nil
		r.inst = nil
		delete(s.res, r.key)
		s.emit(Failed{Key: r.key, Err: fmt.Errorf("resume instance %s: %w", id, err)})
	}
}

// finishResume makes a resumed instance ready and hands the environment's
// slot to the job that resumed it.
func (s *Scaler) finishResume(in *instance) {
	e := in.env
	s.setPhase(in, phaseReady)
	in.readyAt = s.now
	if e == nil {
		// A tier instance (or one whose environment was consumed): idle
		// from now, and the resume time is what a waiting job waited.
		in.idleSince = s.now
		in.nextHB = s.now.Add(s.cfg.HeartbeatInterval)
		if !in.resumeAt.IsZero() {
			s.learnResume(s.now.Sub(in.resumeAt))
			in.resumeAt = time.Time{}
			in.resumeFails = 0
		}
		s.bindQueued()
		return
	}
	if e.inUse == nil {
		// Nobody waits (the job died with a previous process): park it again.
		s.setPhase(in, phaseSuspendWait)
		s.issueSuspend(in)
		return
	}
	// The environment's slot now belongs to the job that resumed it; the
	// environment stays linked so that Release can consume it.
	r := e.inUse
	in.slots[e.slot] = r
	in.used++
	r.inst, r.slot = in, e.slot
	r.acquired, r.waiting = true, false
	s.started(r)
	s.acquired++
	s.updateFree(in)
	s.emit(Bound{Key: r.key, InstanceID: in.id, State: e.state})
	s.bindQueued()
}

// Environments returns the keys of parked environments, sorted.
func (s *Scaler) Environments() []string {
	keys := make([]string, 0, len(s.envs))
	for k := range s.envs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
