package scaler

import (
	"sort"
	"time"

	"github.com/berth-ci/berth/policy"
)

// The suspended tier of idle capacity.
//
// Besides hot idle instances (ready, taking bookings at once), the core
// keeps idle instances suspended when the provider can suspend: a hot idle
// instance past idle_time is suspended instead of deleted, and a suspended
// idle instance is deleted after suspended_idle_time. A booking that finds
// no hot slot resumes a pooled instance (resume ≪ boot) before it boots a
// new one. Pooled instances are not --suspend environments: they hold no
// environment and belong to nobody, so they never take a Resume of an
// environment, and a booking reaches them only after they are ready again.
// They count against max_instances, but not against on-demand bookings
// (they are capacity, not held by a job).

// tierOn reports whether the suspended tier is in use under p: asked for
// with suspended_idle_time, or chosen by target_wait.
func (s *Scaler) tierOn(p policy.Policy) bool {
	return s.cfg.CanSuspend && (p.SuspendedIdleTime > 0 || p.TargetWait > 0)
}

// suspendedKeep is how long a suspended idle instance beyond the tier's
// target is kept: suspended_idle_time, or under target_wait alone the time
// in which it costs two boots (2 × boot time / suspended_cost, 20 minutes
// at 60 s and 0.1): a surplus instance is likely needed again within that
// (measured on the Travis week: shorter keeps trade boots for waits).
func (s *Scaler) suspendedKeep(p policy.Policy) time.Duration {
	if p.SuspendedIdleTime > 0 {
		return p.SuspendedIdleTime
	}
	return time.Duration(2 * float64(s.bootEst) / s.cfg.SuspendedCost)
}

// setPooled moves in into or out of the tier.
func (s *Scaler) setPooled(in *instance, v bool) {
	if in.pooled == v {
		return
	}
	in.pooled = v
	if v {
		s.pooled++
		in.unclaimedAt = time.Time{}
	} else {
		s.pooled--
	}
	s.updatePool(in)
}

// updatePool keeps s.pool, the pooled instances that can be resumed now, in
// step with in's phase.
func (s *Scaler) updatePool(in *instance) {
	want := in.pooled && in.phase == phaseSuspended
	if want && in.poolIdx < 0 {
		in.poolIdx = len(s.pool)
		s.pool = append(s.pool, in)
	} else if !want && in.poolIdx >= 0 {
		last := s.pool[len(s.pool)-1]
		s.pool[in.poolIdx] = last
		last.poolIdx = in.poolIdx
		s.pool = s.pool[:len(s.pool)-1]
		in.poolIdx = -1
	}
}

// suspendIdle moves a hot idle instance into the tier. It leaves the free
// list before the Suspend, so no booking can land on it (I5).
func (s *Scaler) suspendIdle(in *instance) {
	s.issueSuspend(in)
	s.setPooled(in, true)
}

// unclaimed handles a suspended instance with no environment that the core
// did not suspend for the tier (left by a previous process, or whose
// environment was consumed): with the tier on it joins the tier; without,
// it is deleted after idle_time (docs/semantics.md, "Restart").
func (s *Scaler) unclaimed(in *instance) {
	if s.tierOn(s.policy()) {
		s.setPooled(in, true)
		in.pooledAt = s.now
		return
	}
	in.unclaimedAt = s.now
	s.deleteUnclaimedNow(in)
}

// resumePooled resumes up to n pooled instances for demand that has no hot
// slot, most recently suspended first, and returns how many.
func (s *Scaler) resumePooled(n int) int {
	k := min(n, len(s.pool))
	for range k {
		in := s.pool[len(s.pool)-1]
		s.setPhase(in, phaseResuming) // leaves the tier
		in.resumeAt = s.now
		s.emit(Resume{ID: in.id})
	}
	return k
}

// resumeFailed puts a pooled instance whose resume failed back into the
// tier, or deletes it after FailureThreshold failures in a row.
func (s *Scaler) resumeFailed(in *instance, err error) {
	in.resumeFails++
	in.lastErr = err.Error()
	if in.resumeFails >= s.cfg.FailureThreshold {
		s.deleteInstance(in, ReasonResumeFailed)
		return
	}
	s.setPhase(in, phaseSuspended)
	s.setPooled(in, true)
}

// expirePooled deletes pooled instances suspended longer than
// suspended_idle_time while the tier holds more than its target, oldest
// first. Without the tier (a policy period turned it off) they go after
// idle_time, like any idle instance.
func (s *Scaler) expirePooled(cands []*instance, p policy.Policy) {
	keep := s.suspendedKeep(p)
	if !s.tierOn(p) {
		keep = p.IdleTime
	}
	excess := s.pooled - s.poolTarget(p)
	if excess <= 0 {
		return
	}
	old := cands[:0]
	for _, in := range cands {
		if s.now.Sub(in.pooledAt) >= keep {
			old = append(old, in)
		}
	}
	if len(old) == 0 {
		return
	}
	sort.SliceStable(old, func(i, j int) bool { return old[i].pooledAt.Before(old[j].pooledAt) })
	n := min(excess, len(old))
	cands = old
	s.emit(Scaled{Direction: "in", Suspended: s.pooled, SuspendedTarget: s.poolTarget(p), N: n, Tier: true})
	for _, in := range cands[:n] {
		s.deleteInstance(in, ReasonSuspendedIdle)
	}
}

// Queued tells the core how many jobs wait in the job source with no
// booking yet (the built-in queue knows). They are demand like bookings, so
// that preemptive mode with idle_count = 0 still starts instances for them.
// Each successful Reserve lowers the count by one until the next report:
// the booking is for one of those jobs, and must not count twice.
func (s *Scaler) Queued(n int) {
	n = max(n, 0)
	if n == s.queued {
		return
	}
	s.queued = n
	s.scaleUp()
}

// learnBoot and learnResume keep exponentially weighted estimates of how
// long a boot (request to ready) and a tier resume (Resume to ready) take,
// as seen through the listings: what a waiting job actually waits.
func (s *Scaler) learnBoot(d time.Duration) {
	s.bootEst = learn(s.bootEst, d, &s.bootSeen)
}

func (s *Scaler) learnResume(d time.Duration) {
	s.resumeEst = learn(s.resumeEst, d, &s.resSeen)
}

func learn(est, d time.Duration, seen *bool) time.Duration {
	if d <= 0 {
		return est
	}
	if !*seen {
		*seen = true
		return d
	}
	return est + (d-est)/5
}
