package scaler

import "time"

// The online part of the forecast: what the last 90 minutes showed.
//
// The profile (forecast.go) is memory: it protects a slot of the day only
// after it saw traffic there. A new install, a team that moves its hours,
// a burst at an hour never seen: the profile holds nothing for them, and
// each such burst waits a boot. The envelope protects what follows from
// what the last minutes showed: the largest need (jobs within the tier's and
// the hot pool's horizons) of the arrivals the profile did not expect, held
// for envelopeHold after it. The first burst of a new pattern waits a boot;
// the next one within the hold finds a pool.
//
// Only surprises count: an arrival whose need is more than 1.25 times what
// the profile holds for its slot (surpriseRatio). A burst the profile knows is
// sized by the profile, and spent once it came (resize); holding it for an
// hour and a half as well would keep nightly's pool that long every night.

// envelopeHold is how long a surprise protects what follows: 90 minutes.
// Chosen on office from an empty model (builds ~20 minutes apart: with an
// hour, the builds after a lull longer than that waited, p95 40 s on seed
// 2; 14 s with 90 minutes) and nightly (two hours held the pool for its
// unannounced first 02:00 burst long enough to cost 0.022 of utilization
// over the week, 90 minutes 0.011).
const envelopeHold = 6 * profileSlot

// surpriseRatio is how much larger than the profile's need an arrival's
// need must be to count as a pattern the profile does not know: a quarter
// more. Chosen on nightly (its 02:00 burst varies by a few per cent from
// night to night, which must not count; the profile keeps the largest seen)
// and release (its release day's builds of up to 80 jobs where the profile
// held office builds of up to 40 must; twice missed them).
const surpriseRatio = 1.25

// envelopeMinutes is the envelope's resolution: one entry per minute.
const envelopeMinutes = int(envelopeHold / time.Minute)

// envelope is the largest surprise need per minute over the last envelopeHold.
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
	w := a.weekSlot(now)
	if w != a.expSlot || a.expFolds != a.folds {
		a.expSlot, a.expFolds = w, a.folds
		nd, _, _ := a.profiled(w)
		a.expected = nd
	}
	if float64(tier) > surpriseRatio*a.expected.Tier || float64(hot) > surpriseRatio*a.expected.Hot {
		a.env.add(now, float64(tier), float64(hot))
	}
}
