package scaler

import (
	"fmt"
	"sort"
	"strings"
)

// This file exposes internals to the external tests (package scaler_test):
// a from-scratch recount of the core's incremental bookkeeping, so that the
// simulation can check, after every step, that the O(1) counters behind
// Reserve and scaleUp have not drifted from the structures they summarise.

// Recount is the core's numbers recomputed from its raw structures.
type Recount struct {
	// InUse is the demand that needs running instances: bookings bound to or
	// waiting for a "current" instance, and unbound ones.
	InUse int
	// Have counts creating, booting, ready, resuming and restored instances
	// plus requested-but-unlisted ones, plus the suspended idle tier.
	Have int
	// IdleTarget is the active policy's idle slots for InUse.
	IdleTarget int
	// Desired is ceil((InUse+IdleTarget)/capacity) plus the tier's target.
	Desired int
	// Total counts every instance plus pending requests.
	Total int
	// Pooled counts instances of the suspended idle tier; PoolTarget is
	// the tier's target.
	Pooled, PoolTarget int
}

// RecountForTest recomputes the scaling inputs without the incremental counters.
func (s *Scaler) RecountForTest() Recount { return s.RecountWithoutForTest(nil) }

// RecountWithoutForTest is RecountForTest as if the parked environments'
// instances in resumed had not been resumed yet: neither they nor the
// bookings they serve count. A resume is a job's doing, not a scaling
// decision, so a scale-up is judged against the fleet without it.
func (s *Scaler) RecountWithoutForTest(resumed map[string]bool) Recount {
	var rc Recount
	for _, in := range s.instances {
		if resumed[in.id] {
			continue
		}
		if in.phase.current() || in.phase == phaseRestored {
			rc.Have++
		}
	}
	rc.Have += len(s.pending)
	rc.Total = len(s.instances) + len(s.pending)
	for _, r := range s.res {
		if r.inst != nil && r.inst.slots[r.slot] == r && !r.inst.phase.current() {
			continue // bound to a draining or suspend_wait instance
		}
		if r.env != nil && (r.inst == nil || !r.inst.phase.current() || resumed[r.inst.id]) && (r.inst == nil || r.inst.slots[r.slot] != r) {
			continue // waits for its environment's own instance, not yet resuming
		}
		rc.InUse++
	}
	_, rc.IdleTarget = s.demand(s.policy())
	rc.InUse += s.queued
	rc.Desired = ceilDiv(rc.InUse+rc.IdleTarget, s.cfg.CapacityPerInstance)
	// The suspended tier: pooled instances count as had, its target as
	// desired (I7 with the tier).
	for _, in := range s.instances {
		if in.pooled {
			rc.Have++
			rc.Pooled++
		}
	}
	rc.PoolTarget = s.poolTarget(s.policy())
	rc.Desired += rc.PoolTarget
	return rc
}

// PooledForTest describes every instance of the suspended idle tier: its
// phase and whether it holds an environment or a booking (it never may).
func (s *Scaler) PooledForTest() map[string]string {
	out := map[string]string{}
	for id, in := range s.instances {
		if !in.pooled {
			continue
		}
		d := in.phase.String()
		if in.env != nil {
			d += " env=" + in.env.key
		}
		if in.used > 0 {
			d += fmt.Sprintf(" used=%d", in.used)
		}
		out[id] = d
	}
	return out
}

// HeldSlotsForTest returns, per instance ID, a description of every slot held
// by a reservation, an acquisition or a parked environment.
func (s *Scaler) HeldSlotsForTest(id string) []string {
	in, ok := s.instances[id]
	if !ok {
		return nil
	}
	var out []string
	for i, r := range in.slots {
		switch {
		case r != nil && r.acquired:
			out = append(out, fmt.Sprintf("%d:acquired:%s", i, r.key))
		case r != nil:
			out = append(out, fmt.Sprintf("%d:reserved:%s", i, r.key))
		case in.env != nil && in.env.slot == i:
			out = append(out, fmt.Sprintf("%d:suspended:%s", i, in.env.key))
		}
	}
	if in.env != nil && in.slots[in.env.slot] != nil {
		out = append(out, "env:"+in.env.key)
	}
	return out
}

// PhaseForTest returns an instance's phase name, or "" when unknown.
func (s *Scaler) PhaseForTest(id string) string {
	if in, ok := s.instances[id]; ok {
		return in.phase.String()
	}
	return ""
}

// EnvForTest describes a parked environment: its instance and whether it is
// lost or in use.
func (s *Scaler) EnvForTest(key string) (instID, lost, inUseBy string, ok bool) {
	e, ok := s.envs[key]
	if !ok {
		return "", "", "", false
	}
	if e.inUse != nil {
		inUseBy = e.inUse.key
	}
	return e.instID, e.lost, inUseBy, true
}

// CheckForTest verifies every incremental counter and cross-link of the core
// against its raw structures and returns the first inconsistency found.
func (s *Scaler) CheckForTest() error {
	var errs []string
	fail := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	var byPhase [numPhases]int
	offCurrent, acquired := 0, 0
	inSlots := map[*reservation]bool{}
	for id, in := range s.instances {
		if in.id != id {
			fail("instance map key %s holds %s", id, in.id)
		}
		byPhase[in.phase]++
		used := 0
		for i, r := range in.slots {
			if r == nil {
				continue
			}
			used++
			inSlots[r] = true
			if s.res[r.key] != r {
				fail("%s slot %d holds %s which is not a live reservation", id, i, r.key)
			}
			if r.inst != in || r.slot != i {
				fail("%s slot %d holds %s which points elsewhere", id, i, r.key)
			}
			if r.acquired {
				acquired++
			}
			if in.env != nil && in.env.slot == i && in.env.inUse != r {
				fail("%s slot %d belongs to environment %s but holds %s", id, i, in.env.key, r.key)
			}
		}
		if used != in.used {
			fail("%s used=%d, slots say %d", id, in.used, used)
		}
		if !in.phase.current() {
			offCurrent += used
		}
		want := in.phase == phaseReady && in.freeSlots() > 0
		if have := in.freeIdx >= 0; have != want {
			fail("%s (phase %s, free %d) in free list = %v, want %v", id, in.phase, in.freeSlots(), have, want)
		}
		if in.freeIdx >= 0 && (in.freeIdx >= len(s.free) || s.free[in.freeIdx] != in) {
			fail("%s freeIdx %d is stale", id, in.freeIdx)
		}
		if e := in.env; e != nil {
			if s.envs[e.key] != e {
				fail("%s holds environment %s which is not registered", id, e.key)
			}
			if e.inst != in {
				fail("environment %s of %s points elsewhere", e.key, id)
			}
		}
	}
	if byPhase != s.byPhase {
		fail("byPhase %v, recount %v", s.byPhase, byPhase)
	}
	if offCurrent != s.offCurrentUsed {
		fail("offCurrentUsed %d, recount %d", s.offCurrentUsed, offCurrent)
	}
	if acquired != s.acquired {
		fail("acquired %d, recount %d", s.acquired, acquired)
	}
	queued := map[*reservation]bool{}
	for _, r := range s.queue[s.qhead:] {
		if r != nil && r.queued {
			queued[r] = true
		}
	}
	for k, r := range s.res {
		switch {
		case inSlots[r]:
		case queued[r]:
			if r.inst != nil {
				fail("queued reservation %s is bound to %s", k, r.inst.id)
			}
		case r.env != nil && r.env.inUse == r && r.inst == r.env.inst && r.inst != nil:
			// A resume waiting for its instance.
		default:
			fail("reservation %s is neither bound, queued nor resuming", k)
		}
	}
	for k, e := range s.envs {
		if e.key != k {
			fail("env map key %s holds %s", k, e.key)
		}
		if e.inst != nil && (s.instances[e.inst.id] != e.inst || e.inst.env != e) {
			fail("environment %s points at instance %s which does not hold it", k, e.inst.id)
		}
		if e.inst == nil && e.lost == "" {
			fail("environment %s has no instance but is not marked lost", k)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	sort.Strings(errs)
	return fmt.Errorf("core bookkeeping is inconsistent:\n  %s", strings.Join(errs, "\n  "))
}
