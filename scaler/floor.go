package scaler

import (
	"math"
	"time"
)

// A floor from the target itself.
//
// Neither the profile nor the envelope protects jobs that come alone at
// random times: 20 a day leave every slot of the profile nearly empty and
// no burst to remember, and each job waits a boot (p95 a boot). For jobs
// arriving at random at rate λ, a pool of k instances serves a job within
// the target unless k others arrived within the horizon before it (the
// pool is refilled by capacity started when it was drawn, which meets the
// target for jobs arriving a horizon later, see setHorizons). Those others
// are Poisson(λ·horizon), so the floor is the least k with P(N ≥ k) ≤
// coverShare: one instance at 20 jobs a day, more at higher rates (where
// the profile's burst need is larger anyway). It is held in the cheaper
// pool that meets the target, as the rest of the sizing is: suspended when
// a resume meets it, hot for the hot horizon when it does not.

// floorWindow is how far back the rate for the floor is taken. Chosen on
// lowvolume (20 jobs a day: eight hours hold about seven, and none 0.1 % of
// the time; with four hours, none 4 % of the time, and seed 3 missed
// p95 15 s after a learned day with 31 s) and office and nightly (a floor
// of one to three held eight hours into their evening costs 0.002-0.004).
const floorWindow = 8 * time.Hour

// floorBuckets is the number of profile slots the recent count keeps.
const floorBuckets = int(floorWindow / profileSlot)

// floorCounts counts arrivals per profile slot over the last floorWindow.
type floorCounts struct {
	slot [floorBuckets]int64 // Unix time / profileSlot of each bucket
	n    [floorBuckets]int
}

func (c *floorCounts) add(now time.Time, n int) {
	s := now.Unix() / int64(profileSlot/time.Second)
	i := int(s % int64(floorBuckets))
	if c.slot[i] != s {
		c.slot[i], c.n[i] = s, 0
	}
	c.n[i] += n
}

// count is the arrivals within the last floorWindow (by whole slots).
func (c *floorCounts) count(now time.Time) int {
	s := now.Unix() / int64(profileSlot/time.Second)
	n := 0
	for i := range floorBuckets {
		if c.slot[i] > s-int64(floorBuckets) && c.slot[i] <= s {
			n += c.n[i]
		}
	}
	return n
}

// floorRate is the rate of random arrivals the floor protects: the lone
// arrivals (no other within the tier's horizon before them, net of jobs
// ending) of the last floorWindow. A burst is no random arrival: the
// profile and the envelope size the pools for it, and counted here it held
// a floor of five for hours after nightly's 02:00 burst. net is that
// rate less the rate at which jobs end now: busy instances coming back
// refill the pool as arrivals draw it.
func (a *arrivals) floorRate(now time.Time) (lam, net float64) {
	lam = a.rawFloorRate(now)
	return lam, max(lam-a.returning(now, time.Second), 0)
}

func (a *arrivals) rawFloorRate(now time.Time) float64 {
	return float64(a.floors.count(now)) / floorWindow.Seconds()
}

// poissonFloor is 0 when no job is expected (lam 0) or the horizon is
// empty, else the least k ≥ 1 with P(N ≥ k) ≤ coverShare for N ~
// Poisson(net·h): the arrivals within the horizon net of the instances
// coming back meanwhile.
func poissonFloor(lam, net float64, h time.Duration) int {
	if lam <= 0 || h <= 0 {
		return 0
	}
	mu := net * h.Seconds()
	if mu <= 0 {
		return 1
	}
	p := math.Exp(-mu) // P(N = 0)
	cdf := p           // P(N ≤ k-1) for the k being tried
	for k := 1; k < 100000; k++ {
		if 1-cdf <= coverShare {
			return k
		}
		p *= mu / float64(k)
		cdf += p
	}
	return 100000
}
