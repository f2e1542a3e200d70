package scaler

import (
	"math"
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

// targetWaitAlone reports whether target_wait alone decides how long the
// tier's surplus stays (no suspended_idle_time): then the profile, the
// refill and a day unlike its profile do (expirePooled).
func (s *Scaler) targetWaitAlone(p policy.Policy) bool {
	return s.tierOn(p) && p.TargetWait > 0 && p.SuspendedIdleTime == 0
}

// suspendedKeep is how long a suspended idle instance beyond the tier's
// target is kept: suspended_idle_time, or under target_wait alone the time
// in which keeping it costs what booting a new one does (boot time /
// suspended_cost, 10 minutes at 60 s and 0.1). That is the ski-rental
// break-even: whenever the instance is needed again, keeping it that long
// and then deleting it costs at most twice what hindsight would have paid.
func (s *Scaler) suspendedKeep(p policy.Policy) time.Duration {
	if p.SuspendedIdleTime > 0 {
		return p.SuspendedIdleTime
	}
	return time.Duration(float64(s.bootEst) / s.cfg.SuspendedCost)
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
// suspended_idle_time (under target_wait, the break-even time, see below)
// while the tier holds more than its target, oldest first. Without the tier (a policy period turned it off) they go after
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
	expired := 0
	for _, in := range cands {
		if s.now.Sub(in.pooledAt) >= keep {
			expired++
		}
	}
	// Under target_wait alone, keeping a surplus instance pays only if a
	// job comes for it within the break-even time. After a burst at a set
	// time the profile can tell how many will: the rest goes at once.
	// Elsewhere, while the refill does not fully trust returns (it boots
	// to refill the tier), the instances down to the depth the traffic of
	// this time draws the pool within the break-even time stay past it
	// (drain.go): each stands in for a boot of the refill. The refill
	// boots at most the tier's target after a drain, so no more than a
	// second target's worth stands in for anything (a target that needs
	// no tier, a boot within target_wait, keeps no depth). At full trust
	// the returns refill the tier by themselves and the surplus goes. On a
	// day unlike its profile, none of this is known, and the surplus stays
	// (unlike.go).
	if s.targetWaitAlone(p) {
		if s.arr.unlike(s.now) {
			expired = 0 // a day unlike its profile keeps its surplus (unlike.go)
		} else if n, ok := s.arr.expectedJobs(s.now, keep); ok {
			expired = max(expired, s.pooled-max(s.poolTarget(p), n))
		} else {
			t := s.poolTarget(p)
			if s.arr.trust < 1 {
				expired = min(expired, s.pooled-max(t, min(s.arr.drainDepth(s.now, keep), 2*t)))
			}
		}
	}
	n := min(excess, expired, len(cands))
	if n <= 0 {
		return
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].pooledAt.Before(cands[j].pooledAt) })
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
	s.learnedTimes++
	s.bootEst = learn(s.bootEst, d, &s.bootSeen)
}

func (s *Scaler) learnResume(d time.Duration) {
	s.learnedTimes++
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

// target_wait as a dial. A burst that empties the pools is met by capacity
// started when it came: resumes, ready after the resume time r, and boots,
// ready after the boot time b (both as learned from the listings, what a
// waiting job actually waits). A job arriving t after the burst began and
// finding the pools empty waits r − t for a resume or b − t for a boot, so
// it meets the target T by itself once t ≥ b − T. The pools need to cover
// only the jobs arriving within the horizon b − T: the tier's horizon. The
// suspended tier serves a job in r, so when r > T the jobs arriving within
// r − T (the hot horizon) need hot capacity, and the tier covers the rest.
// A longer target shortens both horizons, so each target is its own point
// on the cost/wait curve: 60 s at a 60 s boot holds almost nothing.

// setHorizons tells the arrival model which horizons to count for p.
func (s *Scaler) setHorizons(p policy.Policy) {
	if p.TargetWait <= 0 {
		return
	}
	s.arr.setHorizons(s.bootEst-p.TargetWait, s.resumeEst-p.TargetWait)
	s.arr.drain.setHorizon(s.suspendedKeep(p))
}

// lead is how far ahead the forecast looks: a pool for a learned burst must
// be booted and suspended before it, which takes a boot and a suspend (no
// longer than a boot, as a rule) — the 9:00 ramp is pre-warmed from about
// 8:58 at a 60 s boot.
func (s *Scaler) lead() time.Duration { return 2 * s.bootEst }

// sizing is the least-cost pair of pools that keeps the p95 wait within
// p.TargetWait for forecast f. The tier (when the provider can suspend and
// a suspended instance costs less than a running one) holds the jobs of
// the tier's horizon beyond the hot pool; the hot pool holds the jobs of the
// hot horizon, which is empty when a resume meets the target. Without the
// tier everything within the tier's horizon is held hot.
func (s *Scaler) sizing(p policy.Policy, f forecast) Sized {
	z := Sized{Rate: f.Rate, Burst: f.Burst, Source: f.Source, BootTime: s.bootEst,
		ResumeTime: s.resumeEst, TargetWait: p.TargetWait}
	z.Tier = s.tierOn(p) && s.cfg.SuspendedCost < 1 && s.resumeEst < s.bootEst
	capSlots := s.cfg.MaxInstances * s.cfg.CapacityPerInstance
	all, hot := int(math.Ceil(f.Burst)), int(math.Ceil(f.Hot))
	if z.Tier {
		z.Hot = min(hot, all)
		z.Suspended = min(ceilDiv(all-z.Hot, s.cfg.CapacityPerInstance), s.cfg.MaxInstances)
	} else {
		z.Hot = all
	}
	z.Hot = min(z.Hot, capSlots)
	return z
}
