package scaler

import "time"

// A day unlike its profile: keep the tier's surplus.
//
// The tier deletes an instance beyond its target once it was kept the
// break-even time, or the depth the traffic of this time of day draws the
// pool (drain.go). Both come from the profile. On a day far busier than
// the profile knows (a release day whose builds come twice as often and
// twice as large as on the other days, a new team's hours), the surplus
// the day's own builds leave is what its next, larger builds need, and
// deleting it at the break-even time boots it again a few minutes later,
// or makes a burst larger than the profile's wait a boot. So while the
// last hour's arrivals are more than unlikeRatio times what the profile
// expects for that hour, the surplus stays; it goes at the break-even time
// again once the hour looks like the profile.

// unlikeRatio is how many times the profile's arrivals of the last hour
// the arrivals must be to make a day unlike its profile. Three: release's
// release day brings about four times an office day's jobs an hour, a
// growing load about 1.3 times the day before; an office hour is above
// three times its profile only with twice its usual builds, all large.
const unlikeRatio = 3.0

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

// expectedArrivals is how many arrivals the profile expects in week slot
// w, blended as slotNeed blends the needs; −1 if it never saw that time.
func (a *arrivals) expectedArrivals(w int) float64 {
	d := a.priorDay(w)
	seen := min(a.m.WeekSeen[w], maxWeekWeight)
	switch {
	case seen > 0 && a.m.DaySeen[d] > 0:
		k := float64(seen)
		return (k*a.m.WeekRate[w] + priorWeight*a.m.DayRate[d]) / (k + priorWeight) * profileSlot.Seconds()
	case a.m.DaySeen[d] > 0:
		return a.m.DayRate[d] * profileSlot.Seconds()
	}
	return -1
}
