package scaler

import "time"

// A day unlike its profile: keep the tier's surplus.
//
// The tier deletes an instance beyond its target once it was kept the
// break-even time, or below the depth the traffic of this time of day
// draws the pool (drain.go). Both come from the profile. On a day far
// busier than the profile knows (a release day whose builds come twice as
// often and twice as large as on the other days, a new team's hours), the
// surplus the day's own builds leave is what its next, larger builds
// need: deleting it at the break-even time boots it again minutes later,
// and a burst larger than the profile's finds nothing. So while the last
// hour brought more than unlikeRatio times the arrivals the profile
// expected of it, the surplus stays; once an hour looks like the profile
// again, it goes at the break-even time as before.

// unlikeRatio is how many times the profile's arrivals of the last hour
// make a day unlike its profile: two. Chosen on the generated shapes
// (bench/table.sh, seeds 1-3): release's release day brings about four
// times an office day's jobs an hour, and release meets 15 s at two
// (seeds 1 and 2: 31 / 17 s before, 14 / 14 s), not at three or four (seed
// 1: 25-28 s). An office, two offices or monorepo hour is rarely twice its
// profile (office -0.004 to -0.014 utilization, monorepo -0.001 to -0.003),
// a nightly burst never, being the profile's.
const unlikeRatio = 2.0

// unlikeSlots is the hour compared: the last four slots that ended.
const unlikeSlots = 4

// unlikeMinJobs is the least arrivals an hour for the comparison to mean
// anything: a handful of jobs at an hour the profile learned quiet is
// not a day unlike it (low volume).
const unlikeMinJobs = minCurrentJobs

// unlike reports whether the arrivals of the last unlikeSlots slots that
// ended are more than unlikeRatio times what the profile expected of them
// before it learned from them (the profile folds each slot in as it ends,
// so today's own arrivals would otherwise be half of what they are
// compared with). A time of day the profile had never seen is not unlike
// it: the envelope and the floor size a new install's first day.
func (a *arrivals) unlike(now time.Time) bool {
	a.roll(now)
	n, exp := 0, 0.0
	for i, c := range a.lastCounts {
		if a.lastExpected[i] < 0 {
			return false
		}
		n += c
		exp += a.lastExpected[i]
	}
	return n >= unlikeMinJobs && float64(n) > unlikeRatio*exp
}

// forgetLastHour marks the last hour's slots as not seen, so that no day
// counts as unlike its profile until four slots were compared again: at
// the start, and after an idle week whose zeros were never compared.
func (a *arrivals) forgetLastHour() {
	for i := range a.lastExpected {
		a.lastExpected[i] = -1
	}
}

// expectedArrivals is how many arrivals the profile expects in week slot
// w, blended as slotNeed blends the needs; −1 if it never saw that time.
func (a *arrivals) expectedArrivals(w int) float64 {
	d := a.priorDay(w)
	if a.m.DaySeen[d] == 0 {
		return -1
	}
	return a.blended(w, d, a.m.WeekRate, a.m.DayRate) * profileSlot.Seconds()
}
