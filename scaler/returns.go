package scaler

import (
	"math"
	"slices"
	"time"

	"github.com/berth-ci/berth/policy"
)

// Busy instances expected back, from learned job durations.
//
// The refill (scaleUp) boots what the tier is short of less the busy
// instances expected back within the refill horizon. The recent release
// rate says little after a lull: a build of k jobs drains the tier, the
// rate is near zero, the refill boots k, and the k busy instances come
// back minutes later to a tier that is full, so k are deleted as surplus.
// How long the jobs run says more: a job that has run for a while, of a
// kind that runs minutes, ends soon. durations learns the distribution of
// job run times from the releases; expectedReturns counts, for each busy
// job, the chance that it ends within the horizon given how long it has
// run, at the count reached with 95 % probability.

// durationBuckets is the histogram's size: powers of two seconds, up to
// 2^17 s (36 hours), longer than any job a CI fleet runs.
const durationBuckets = 18

// durationMemory is how many releases the histogram remembers: each
// release weighs the older ones down by 1/durationMemory, so it follows a
// fleet whose jobs change over a few days.
const durationMemory = 2000

// minDurations is how many releases the histogram needs before it counts
// returns: fewer say little about the run times.
const minDurations = 20

// returnsZ is the one-sided normal quantile for 95 %: returns are counted
// at their mean less returnsZ standard deviations.
const returnsZ = 1.645

// durations is a decayed histogram of job run times.
type durations struct {
	w [durationBuckets]float64
	n int
}

func durationBucket(d time.Duration) int {
	if d < 2*time.Second {
		return 0
	}
	return min(int(math.Log2(d.Seconds())), durationBuckets-1)
}

// add learns one job's run time.
func (h *durations) add(d time.Duration) {
	for i := range h.w {
		h.w[i] *= 1 - 1.0/durationMemory
	}
	h.w[durationBucket(d)]++
	h.n++
}

// survival is the share of run times longer than t, linear within a bucket.
func (h *durations) survival(t time.Duration) float64 {
	total, above := 0.0, 0.0
	b := durationBucket(t)
	for i, v := range h.w {
		total += v
		if i > b {
			above += v
		}
	}
	if total == 0 {
		return 0
	}
	lo, hi := math.Exp2(float64(b)), math.Exp2(float64(b+1))
	if b == 0 {
		lo = 0
	}
	frac := min(max((hi-t.Seconds())/(hi-lo), 0), 1)
	return (above + frac*h.w[b]) / total
}

// expectedReturns is how many busy jobs end within d, at 95 % probability.
func (s *Scaler) expectedReturns(d time.Duration) float64 {
	if s.runs.n < minDurations {
		return 0
	}
	var p []float64
	for _, r := range s.res {
		if !r.acquired || r.startedAt.IsZero() {
			continue
		}
		age := s.now.Sub(r.startedAt)
		if sa := s.runs.survival(age); sa > 0 {
			p = append(p, (sa-s.runs.survival(age+d))/sa)
		}
	}
	slices.Sort(p) // a sum in a fixed order: the core is deterministic
	mean, v := 0.0, 0.0
	for _, q := range p {
		mean += q
		v += q * (1 - q)
	}
	return max(mean-returnsZ*math.Sqrt(v), 0)
}

// started marks a reservation's job as running from now.
func (s *Scaler) started(r *reservation) { r.startedAt = s.now }

// countLearnedReturns reports whether the refill may count the returns
// expected from learned run times (expectedReturns). Only where nothing says
// the next burst comes before the returns:
//   - no surprise is held by the envelope and no burst at a set time is
//     still to come: both are bursts the returns would not meet;
//   - this time of day was seen on this kind of day, so its drain depth is
//     learned and not the recent past's;
//   - the traffic of this time draws the pool no deeper than drainGate times
//     the tier's target within the break-even time: one burst's need and
//     little more, so the instances back after it serve the next.
func (s *Scaler) countLearnedReturns(p policy.Policy, pool int) bool {
	if s.runs.n < minDurations {
		return false
	}
	if et, _ := s.arr.env.need(s.now); et > 0 {
		return false
	}
	if n, ok := s.arr.expectedJobs(s.now, s.lead()); ok && n > 0 {
		return false
	}
	if s.arr.m.DaySeen[daySlot(s.arr.weekSlot(s.now))] == 0 {
		return false
	}
	return float64(s.arr.drainDepth(s.now, s.suspendedKeep(p))) <= drainGate*float64(pool)
}

// drainGate is how much deeper than the tier's target the pool may be drawn
// within the break-even time for learned returns to count. Chosen on
// monorepo (pipelines of 50-200 jobs every ~10 minutes: the next pipeline
// comes before the returns, the learned depth is above the target at every
// refill and above 1.25 times it at 96 % of them; counted up to 1.25 or 1.5
// times, its p95 went 15 -> 16 s on seed 3 or its utilization fell 0.002,
// since its refill trust holds it at the edge of the target) and office
// (builds of 10-40 every ~20 minutes: half its refills are within 1.25
// times). At 1.15 monorepo's refills are all but untouched.
const drainGate = 1.15
