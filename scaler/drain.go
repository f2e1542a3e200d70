package scaler

import (
	"math"
	"time"
)

// How deep the pool is drawn within the break-even time.
//
// The tier's target covers the jobs of one burst (the tier's horizon, a
// boot less the target). What it does not tell is whether an instance kept
// beyond that target will be used: a surplus instance kept for the
// break-even time (boot / suspended_cost) costs what a boot does, so it is
// worth keeping when the pool will be drawn down to it within that time,
// and a waste otherwise. Where pipelines come every few minutes and each
// takes instances for longer than the gap, the pool is drawn far below one
// burst's need between returns: deleting the surplus at the break-even
// time and booting it again for the next pipeline paid a boot per job
// (60-80k a week on the monorepo shape, where a fixed pool boots 14k).
//
// The drawdown counts it. Busy is the jobs that arrived and have not ended
// (their instances are out of the pool); an arriving job's drawdown is
// busy now less the least busy within the break-even time before: how
// many instances, at most, the pool lost within that time, net of the
// ones that came back. Its upper quantile per slot, learned and pooled
// like the tier's need (forecast.go), is the depth of the pool that the
// traffic of that time of day uses within a break-even time; an instance
// below it is kept, one above it goes at the break-even time.

// drawdown keeps busy over the last horizon as a monotone queue: each entry
// is smaller than the one after it, so the front is the least busy within
// the horizon, and an entry that a later, smaller one hides is dropped.
// Amortised O(1) per event.
type drawdown struct {
	h    time.Duration
	busy int
	q    []busyAt
	head int
}

type busyAt struct {
	at time.Time
	n  int
}

// setHorizon sets how far back the drawdown looks.
func (d *drawdown) setHorizon(h time.Duration) { d.h = max(h, 0) }

// add counts an arrival (+1) or a job ending (−1) at now and returns the
// drawdown within the horizon, now included.
func (d *drawdown) add(now time.Time, delta int) int32 {
	if d.head == len(d.q) {
		// The first event: busy was what it is since before it.
		d.q = append(d.q, busyAt{at: now, n: d.busy})
	}
	d.trim(now)
	low := min(d.busy, d.q[d.head].n) // d.busy: in effect until now
	d.busy += delta
	for len(d.q) > d.head && d.q[len(d.q)-1].n >= d.busy {
		d.q = d.q[:len(d.q)-1]
	}
	d.q = append(d.q, busyAt{at: now, n: d.busy})
	return int32(max(d.busy-low, 0))
}

// trim drops the front while the entry after it was already in effect at
// now−horizon: the front then no longer holds within the horizon.
func (d *drawdown) trim(now time.Time) {
	from := now.Add(-d.h)
	for d.head+1 < len(d.q) && !d.q[d.head+1].at.After(from) {
		d.head++
	}
	if d.head > 1024 && 2*d.head > len(d.q) {
		d.q = append(d.q[:0], d.q[d.head:]...)
		d.head = 0
	}
}

// drainDepth is how deep the pool is drawn within d from now: the largest
// learned drawdown of the slots in that time (pooled like the tier's need),
// or of the recent past where it still speaks (forecast).
func (a *arrivals) drainDepth(now time.Time, d time.Duration) int {
	return int(math.Ceil(a.forecast(now, d).Drain))
}
