package scaler

import (
	"time"

	"github.com/berth-ci/berth/policy"
)

// How far the tier's refill trusts busy instances to come back.
//
// When a burst drains the suspended tier, the core boots what the tier is
// short of, minus the busy instances expected back soon: booting for those
// too makes a surplus that is deleted unused once they return. How soon is
// soon depends on the traffic. Where bursts come every few minutes (a
// monorepo's pipelines), the next one arrives before the returns do and
// must find the tier full; where arrivals are spread (the Travis week), the
// returns refill the tier in time and every extra boot is waste. No
// constant serves both, so the horizon is steered by the waits the core
// itself sees: every job that waits longer than target_wait shortens it,
// every job that does not lengthens it, in the ratio the p95 target allows
// (coverShare), so that it settles where about coverShare of the jobs miss
// the target (a stochastic-approximation quantile controller). The horizon
// runs from one boot (returns after that come later than a boot would) to a
// boot plus the time a surplus instance is kept (returns after that find
// their surplus deleted anyway).

// refillStep is how far one job moves the refill trust: about 500 jobs in
// a row that miss the target take it from full trust to none, 10,000 that
// meet it back (a few hours of a busy fleet; a step of 0.01 swung with
// every large build, 0.001 followed a changing week too slowly).
const refillStep = 0.002

// refillWindup is how far the trust may run beyond either end of 0..1 (the
// horizon uses it clamped). Clamped at 0, it forgot the misses that no
// trust at all could not prevent while it kept counting every hit, so it
// settled above the share it aims at: 8 % of monorepo's jobs missed, not
// 5 %. Beyond the ends, a lasting excess of misses holds it at no trust.
const refillWindup = 1.0

// observeWait steers the refill trust with one job's wait from its arrival
// (Acquire) to its slot.
func (s *Scaler) observeWait(d time.Duration) {
	if p := s.policy(); p.TargetWait > 0 {
		s.arr.steer(d > p.TargetWait)
	}
}

// steer moves the refill trust after a job that missed the target or met
// it: down by (1 − coverShare) steps for a miss, up by coverShare of a step
// for a hit, so it rests where coverShare of the jobs miss.
func (a *arrivals) steer(missed bool) {
	a.steers++
	if missed {
		a.trust -= refillStep * (1 - coverShare)
	} else {
		a.trust += refillStep * coverShare
	}
	a.trust = min(max(a.trust, -refillWindup), 1+refillWindup)
}

// refillHorizon is how far ahead busy instances count as the tier's refill.
// Without target_wait nothing steers the trust (observeWait), so it would
// stay at its initial half and count returns a quarter of an hour ahead: a
// fixed tier set by hand was then rarely refilled by boots after a drain,
// and jobs waited for returns (Travis p95 58 s, was 14 s). With no
// controller the refill trusts no return beyond one boot, which comes no
// later than the boot it would replace.
func (s *Scaler) refillHorizon(p policy.Policy) time.Duration {
	if p.TargetWait <= 0 {
		return s.bootEst
	}
	return s.arr.refillHorizon(s.bootEst, s.suspendedKeep(p))
}

// refillHorizon is a boot plus the trusted share of keep.
func (a *arrivals) refillHorizon(boot, keep time.Duration) time.Duration {
	return boot + time.Duration(min(max(a.trust, 0), 1)*float64(keep)).Round(time.Second)
}
