package scaler

import (
	"math"
	"sort"

	"github.com/berth-ci/berth/policy"
)

// demand returns the slots that need a running instance and the idle target.
func (s *Scaler) demand(p policy.Policy) (inUse, idleTarget int) {
	inUse = len(s.res) - s.offCurrentUsed
	idleTarget = p.IdleCount
	if p.ScaleFactor > 0 {
		f := min(int(math.Ceil(p.ScaleFactor*float64(inUse))), p.ScaleFactorLimit)
		idleTarget = max(idleTarget, f)
	}
	return inUse, idleTarget
}

func (s *Scaler) current() int {
	return s.byPhase[phaseCreating] + s.byPhase[phaseBooting] + s.byPhase[phaseReady] +
		s.byPhase[phaseResuming] + s.byPhase[phaseRestored] + len(s.pending)
}

// Total returns every instance that counts against max_instances, including
// requested ones not yet listed.
func (s *Scaler) Total() int { return len(s.instances) + len(s.pending) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// scaleUp requests instances when the desired count exceeds what exists. It
// is O(1), so it runs after every event.
func (s *Scaler) scaleUp() {
	p := s.policy()
	inUse, idleTarget := s.demand(p)
	desired := ceilDiv(inUse+idleTarget, s.cfg.CapacityPerInstance)
	have := s.current()
	want := min(desired-have, s.cfg.MaxInstances-s.Total())
	if want <= 0 || s.now.Before(s.hookPauseTo) {
		return
	}
	tokens := int(s.throttle.TokensAt(s.now))
	n := min(want, tokens)
	if n <= 0 {
		return // retried on the next tick when tokens refill
	}
	s.throttle.AllowN(s.now, n)
	for range n {
		s.pending = append(s.pending, s.now)
	}
	s.dirty = true
	s.emit(Scaled{Direction: "up", InUse: inUse, IdleSlots: idleTarget, Have: have, Want: desired, N: n})
	s.emit(Increase{N: n})
}

// scaleIn deletes idle instances beyond the desired count, oldest idle first.
// Candidates have no reserved, acquired or suspended slot; they leave the
// free list before the Decrease, so no Reserve can race the deletion.
func (s *Scaler) scaleIn(idle []*instance, p policy.Policy) {
	if len(idle) == 0 {
		return
	}
	inUse, idleTarget := s.demand(p)
	desired := ceilDiv(inUse+idleTarget, s.cfg.CapacityPerInstance)
	have := s.current()
	excess := have - desired
	if excess <= 0 {
		return
	}
	sort.SliceStable(idle, func(i, j int) bool { return idle[i].idleSince.Before(idle[j].idleSince) })
	n := min(excess, len(idle))
	s.emit(Scaled{Direction: "in", InUse: inUse, IdleSlots: idleTarget, Have: have, Want: desired, N: n})
	for _, in := range idle[:n] {
		s.deleteInstance(in, ReasonIdle)
	}
}

// DeleteAll deletes every instance that holds no job or environment, for
// delete_instances_on_shutdown.
func (s *Scaler) DeleteAll(reason Reason) {
	for _, in := range s.sortedInstances() {
		if in.used == 0 && in.env == nil && in.phase != phaseDeleting {
			s.deleteInstance(in, reason)
		}
	}
}
