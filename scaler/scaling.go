package scaler

import (
	"math"
	"sort"

	"github.com/berth-ci/berth/policy"
)

// demand returns the slots that need a running instance and the idle target.
// Demand is bookings on current instances plus jobs the source holds with no
// booking yet (Queued); the idle target is the largest of idle_count, the
// scale factor's and target_wait's hot pool.
func (s *Scaler) demand(p policy.Policy) (inUse, idleTarget int) {
	inUse = len(s.res) - s.offCurrentUsed - s.resumesWaiting() + s.queued
	idleTarget = p.IdleCount
	if p.ScaleFactor > 0 {
		f := min(int(math.Ceil(p.ScaleFactor*float64(inUse))), p.ScaleFactorLimit)
		idleTarget = max(idleTarget, f)
	}
	if p.TargetWait > 0 {
		idleTarget = max(idleTarget, s.sized.Hot)
	}
	return inUse, idleTarget
}

// resumesWaiting counts bookings that wait for a parked environment's
// instance while it is not current (still suspending, or suspended with the
// resume not yet issued). That instance serves them, so they are no demand
// for another one: counting them made a resume during a suspend ask for an
// instance nobody needed. Once the instance resumes it counts as current,
// and so does the booking it will hold.
func (s *Scaler) resumesWaiting() int {
	n := 0
	for _, e := range s.envs {
		if r := e.inUse; r != nil && (e.inst == nil || !e.inst.phase.current()) && (e.inst == nil || e.inst.slots[e.slot] != r) {
			n++
		}
	}
	return n
}

// poolTarget is how many idle instances the suspended tier should hold:
// suspended_idle_count, or what target_wait sizing chose if more.
func (s *Scaler) poolTarget(p policy.Policy) int {
	if !s.tierOn(p) {
		return 0
	}
	t := p.SuspendedIdleCount
	if p.TargetWait > 0 {
		t = max(t, s.sized.Suspended)
	}
	return t
}

// resize chooses the hot and suspended pools for target_wait from the
// arrival forecast, at least cost (see sizing), and reports a change.
func (s *Scaler) resize(p policy.Policy) {
	if p.TargetWait <= 0 {
		return
	}
	s.setHorizons(p)
	f := s.arr.forecast(s.now, s.lead())
	if n, ok := s.arr.expectedJobs(s.now, s.lead()); ok {
		// A burst at a set time that has come in full is spent: the
		// pools hold only for what is still to come.
		f.Burst, f.Hot = min(f.Burst, float64(n)), min(f.Hot, float64(n))
	}
	// What the last hour showed overrules a profile that expected less
	// (envelope.go), even a slot learned as quiet.
	if et, eh := s.arr.env.need(s.now); et > f.Burst || eh > f.Hot {
		f.Burst, f.Hot, f.Source = max(f.Burst, et), max(f.Hot, eh), "recent surprises"
	}
	// Bursts at any hour of this kind of day (standing.go).
	if nd, ok := s.arr.standing(s.arr.weekSlot(s.now)); ok && (nd.Tier > f.Burst || nd.Hot > f.Hot) {
		f.Burst, f.Hot, f.Source = max(f.Burst, nd.Tier), max(f.Hot, nd.Hot), "bursts at any hour of this kind of day"
	}
	// Jobs at random times are served within the target (floor.go).
	lam, net := s.arr.floorRate(s.now)
	if ft, fh := float64(poissonFloor(lam, net, s.arr.tierH)), float64(poissonFloor(lam, net, s.arr.hotH)); ft > f.Burst || fh > f.Hot {
		f.Burst, f.Hot, f.Source = max(f.Burst, ft), max(f.Hot, fh), "the floor for random arrivals"
	}
	z := s.sizing(p, f)
	if z.Hot != s.sized.Hot || z.Suspended != s.sized.Suspended || z.Tier != s.sized.Tier {
		// The refill's state goes with the decision, for its log line
		// (computed only here: resize runs on every event).
		z.RefillTrust, z.RefillHorizon = s.arr.trust, s.refillHorizon(p)
		z.Keep = s.suspendedKeep(p)
		z.Drain = float64(s.arr.drainDepth(s.now, z.Keep))
		z.KeepAll = s.targetWaitAlone(p) && s.arr.unlike(s.now) // as expirePooled applies it
		s.emit(z)
	}
	s.sized = z
}

func (s *Scaler) current() int {
	return s.byPhase[phaseCreating] + s.byPhase[phaseBooting] + s.byPhase[phaseReady] +
		s.byPhase[phaseResuming] + s.byPhase[phaseRestored] + len(s.pending)
}

// Total returns every instance that counts against max_instances, including
// requested ones not yet listed.
func (s *Scaler) Total() int { return len(s.instances) + len(s.pending) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// scaleUp brings running capacity up to demand + idle target, resuming
// pooled instances before it boots new ones, and boots more when the
// suspended tier is below its target. It is O(1) (plus the instances it
// resumes), so it runs after every event.
func (s *Scaler) scaleUp() {
	if s.stopped {
		return // Shutdown: neither boot nor resume (shutdown.go)
	}
	p := s.policy()
	s.resize(p)
	inUse, idleTarget := s.demand(p)
	desired := ceilDiv(inUse+idleTarget, s.cfg.CapacityPerInstance)
	have := s.current()
	// Resume for demand that instances ready or resuming do not cover:
	// instances still booting come later than a resume, and if demand
	// does not need them they end up in the tier, which is what they were
	// booted for.
	if need := desired - s.byPhase[phaseReady] - s.byPhase[phaseResuming]; need > 0 && len(s.pool) > 0 {
		n := s.resumePooled(need)
		s.emit(Scaled{Direction: "resume", InUse: inUse, IdleSlots: idleTarget, Have: have, Want: desired, N: n,
			Suspended: s.pooled, SuspendedTarget: s.poolTarget(p), Tier: true})
		have += n
	}
	pool := s.poolTarget(p)
	// Pooled instances still suspending count as capacity: they are
	// resumed once suspended, sooner than a boot (I7 counts them too).
	want := desired + pool - have - s.pooled
	if stock := want - max(desired-have, 0); stock > 0 {
		// Busy instances that come back soon refill the tier on their
		// own: booting for them too would only make a surplus that is
		// deleted unused later. How soon is learned (refill.go).
		ret := int(s.arr.returning(s.now, s.refillHorizon(p)))
		// After a lull the release rate is near zero though the busy
		// jobs of the last build end within minutes (returns.go).
		if s.countLearnedReturns(p, pool) {
			ret = max(ret, int(s.expectedReturns(s.refillHorizon(p))))
		}
		want -= min(stock, ret)
	}
	want = min(want, s.cfg.MaxInstances-s.Total())
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
	s.emit(Scaled{Direction: "up", InUse: inUse, IdleSlots: idleTarget, Have: have + s.pooled, Want: desired + pool, N: n,
		Suspended: s.pooled, SuspendedTarget: pool, Tier: pool > 0})
	s.emit(Increase{N: n})
}

// scaleIn takes idle instances beyond the desired count out of the hot
// pool, oldest idle first: into the suspended tier when it is on, else
// deleted. Candidates have no reserved, acquired or suspended slot; they
// leave the free list before the provider call, so no Reserve can race it.
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
	if s.tierOn(p) {
		// Instances still booting are the tier's refills: they must not
		// push a ready instance into the tier while demand (queued jobs
		// about to be booked, in preemptive mode) needs it now.
		excess = min(excess, s.byPhase[phaseReady]+s.byPhase[phaseResuming]-desired)
		if excess <= 0 {
			return
		}
	}
	sort.SliceStable(idle, func(i, j int) bool { return idle[i].idleSince.Before(idle[j].idleSince) })
	n := min(excess, len(idle))
	if s.tierOn(p) {
		s.emit(Scaled{Direction: "suspend", InUse: inUse, IdleSlots: idleTarget, Have: have, Want: desired, N: n,
			Suspended: s.pooled, SuspendedTarget: s.poolTarget(p), Tier: true})
		for _, in := range idle[:n] {
			s.suspendIdle(in)
		}
		return
	}
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
