package scaler

import (
	"fmt"
	"sort"
	"time"
)

// This file holds what the core does when parked environments fill
// max_instances (issue 9): a job that resumes an environment needs no new
// booking (EnvBusy tells the job loop whether it can run now), and a plain
// job that waits for want of any instance evicts the oldest parked
// environment once it has been parked longer than Config.EnvEvictAfter
// (RelieveParked).

// ReasonEnvEvicted is the deletion reason of an instance whose parked
// environment was evicted to make room for queued jobs.
const ReasonEnvEvicted Reason = "environment_evicted"

// EnvEvicted reports that a parked environment was given up to make room for
// waiting jobs: every instance held a parked environment. A later resume of
// Key fails with Why.
type EnvEvicted struct {
	Key        string
	InstanceID string
	ParkedFor  time.Duration
	Why        string
}

func (EnvEvicted) isAction() {}

// EnvBusy reports whether environment key is being resumed by a job right
// now. A job that resumes a key that is not busy can run at once without a
// new booking: it either gets the environment's own slot or fails at once
// (unknown, expired or lost environment).
func (s *Scaler) EnvBusy(key string) bool {
	e, ok := s.envs[key]
	return ok && e.inUse != nil
}

// EnvLost returns why environment key was lost (evicted, or its instance
// gone), so that a job that asks for it is refused at once with the reason;
// "" when the environment is not known as lost.
func (s *Scaler) EnvLost(key string) string {
	if e, ok := s.envs[key]; ok {
		return e.lost
	}
	return ""
}

// RelieveParked is called by a job loop whose Reserve was refused while it
// knows a job is waiting (a queue with a queued job; not a source polled on
// speculation, whose refusals say nothing about demand). If no instance can
// ever be free for that job because every instance max_instances allows
// holds a parked environment, it evicts the environment parked longest,
// provided it has been parked EnvEvictAfter, so waiting jobs do not starve
// until environment_ttl. It evicts at most one per call and reports whether
// it did; the caller retries its booking once the instance is gone.
func (s *Scaler) RelieveParked() bool {
	if s.cfg.EnvEvictAfter <= 0 || s.heldInstances() < s.cfg.MaxInstances {
		return false
	}
	var cands []*env
	for _, e := range s.envs {
		if e.inUse == nil && e.lost == "" && e.inst != nil && e.inst.phase == phaseSuspended &&
			s.now.Sub(e.parkedAt) >= s.cfg.EnvEvictAfter {
			cands = append(cands, e)
		}
	}
	if len(cands) == 0 {
		return false
	}
	sort.Slice(cands, func(i, j int) bool {
		if !cands[i].parkedAt.Equal(cands[j].parkedAt) {
			return cands[i].parkedAt.Before(cands[j].parkedAt)
		}
		return cands[i].key < cands[j].key
	})
	e := cands[0]
	in := e.inst
	parked := s.now.Sub(e.parkedAt)
	e.lost = fmt.Sprintf("evicted at %s to make room for queued jobs: all %d instances (max_instances) held parked environments and this one was parked longest (%s, environment_evict_after = %s)",
		s.now.UTC().Format(time.RFC3339), s.cfg.MaxInstances, parked.Round(time.Second), s.cfg.EnvEvictAfter)
	e.inst = nil
	in.env = nil
	s.emit(EnvEvicted{Key: e.key, InstanceID: in.id, ParkedFor: parked, Why: e.lost})
	s.deleteInstance(in, ReasonEnvEvicted)
	s.dirty = true
	return true
}
