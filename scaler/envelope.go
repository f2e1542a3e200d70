package scaler

import "time"

// The online part of the forecast: what the last hour showed.
//
// The profile (forecast.go) is memory: it protects a slot of the day only
// after it saw traffic there. A new install, a team that moves its hours,
// a burst at an hour never seen: the profile holds nothing for them, and
// each such burst waits a boot. The envelope protects the next hour from
// what the last hour showed: the largest need (jobs within the tier's and
// the hot pool's horizons) of the arrivals the profile did not expect, held
// for envelopeHold after it. The first burst of a new pattern waits a boot;
// the next one within the hour finds a pool.
//
// Only surprises count: an arrival whose need is more than twice what the
// profile holds for its slot (surpriseRatio). A burst the profile knows is
// sized by the profile, and spent once it came (resize); holding it for an
// hour as well would keep nightly's 400-instance pool an hour every night.

// envelopeHold is how long a surprise protects what follows: the quiet gap
// that still counts as busy hours (gapSlots), an hour.
const envelopeHold = gapSlots * profileSlot

// surpriseRatio is how much larger than the profile's need an arrival's
// need must be to count as a pattern the profile does not know: twice it.
// Chosen on nightly (its 02:00 burst varies by a few per cent from night to
// night, which must not count) and the change of team (a 500-job burst
// where the profile held 40 must).
const surpriseRatio = 1.25

// envelopeMinutes is the envelope's resolution: one entry per minute.
const envelopeMinutes = int(envelopeHold / time.Minute)

// envelope is the largest surprise need per minute over the last hour.
type envelope struct {
	min  [envelopeMinutes]int64 // minute of each entry, Unix minutes
	tier [envelopeMinutes]float64
	hot  [envelopeMinutes]float64
}

// add records a surprise with the given needs at now.
func (e *envelope) add(now time.Time, tier, hot float64) {
	m := now.Unix() / 60
	i := int(m % int64(envelopeMinutes))
	if e.min[i] != m {
		e.min[i], e.tier[i], e.hot[i] = m, 0, 0
	}
	e.tier[i] = max(e.tier[i], tier)
	e.hot[i] = max(e.hot[i], hot)
}

// need is the largest surprise need within the last envelopeHold.
func (e *envelope) need(now time.Time) (tier, hot float64) {
	m := now.Unix() / 60
	for i := range envelopeMinutes {
		if e.min[i] > m-int64(envelopeMinutes) && e.min[i] <= m {
			tier, hot = max(tier, e.tier[i]), max(hot, e.hot[i])
		}
	}
	return tier, hot
}

// surprise records an arrival's needs in the envelope when the profile did
// not expect them. The profile's need for the slot is cached per slot and
// per fold (it changes only when a slot is folded in).
func (a *arrivals) surprise(now time.Time, tier, hot int32) {
	w := weekSlot(now)
	if w != a.expSlot || a.expFolds != a.folds {
		a.expSlot, a.expFolds = w, a.folds
		nd, _, _ := a.profiled(w)
		a.expected = nd
	}
	if float64(tier) > surpriseRatio*a.expected.Tier || float64(hot) > surpriseRatio*a.expected.Hot {
		a.env.add(now, float64(tier), float64(hot))
	}
}
