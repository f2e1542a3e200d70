package scaler

import (
	"fmt"
	"sort"
	"time"
)

// This file holds what the core does when parked environments fill
// max_instances (issue 9): a job that resumes an environment needs no new
// booking (EnvBusy tells the job loop whether it can run now), and plain jobs
// refused for want of any instance evict the oldest parked environment once it
// has been parked longer than Config.EnvEvictAfter.

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

// relieveParked runs when a Reserve is refused. If no instance can ever be
// free for a plain job because every instance allowed by max_instances holds
// a parked environment, it evicts the environment parked longest, provided it
// has waited EnvEvictAfter, so queued jobs do not starve until environment_ttl.
// It evicts at most one per refusal; the refused caller retries.
func (s *Scaler) relieveParked() {
	if s.cfg.EnvEvictAfter <= 0 || s.heldInstances() < s.cfg.MaxInstances {
		return
	}
	var cands []*env
	for _, e := range s.envs {
		if e.inUse == nil && e.lost == "" && e.inst != nil && e.inst.phase == phaseSuspended &&
			s.now.Sub(e.parkedAt) >= s.cfg.EnvEvictAfter {
			cands = append(cands, e)
		}
	}
	if len(cands) == 0 {
		return
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
}
