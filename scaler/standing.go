package scaler

// Patterns by kind of day: bursts at any hour.
//
// The profile learns what happens at a time of day, and pools its needs
// only within busy hours. Bursts that come a few times a day at random
// hours, with quiet hours between (a weekend's test matrices), fall into a
// different slot every day: the profile holds a pool where the last ones
// came, never where the next one will. What such a day does tell is that
// bursts of up to N come on it at any hour. The daily profile of a kind of
// day (weekday, weekend) shows it as episodes: runs of slots with arrivals,
// separated by at least episodeGap of quiet slots. When a kind of day saw two or more large episodes (a need of at
// least half its largest), the largest need is held all day on that kind
// of day: the first two bursts of the pattern wait a boot, the third does
// not. One episode (an office day, however long; a nightly burst at a set
// time) holds nothing: the profile sizes it where it comes.

// episodeGap is the quiet that separates two episodes: two hours, twice
// the gap that still counts as busy hours (gapSlots). Chosen on office,
// whose builds ~20 minutes apart leave an hour's gap 5 % of the time (one
// every other day, which split a working day in two) and two hours' 0.25 %,
// and on weekend, whose five batches a day are hours apart.
const episodeGap = 2 * gapSlots

// activeRate is the least arrival rate of a slot of the daily profile that
// counts as having arrivals: half a job in the slot. The profile's rates
// halve with each day a slot stays quiet and never reach zero.
const activeRate = 0.5 / 900.0 // per second, for a 15-minute profileSlot

// standing is the need held all day on the kind of day of week slot w, and
// whether there is one. Cached per kind and per fold.
func (a *arrivals) standing(w int) (need, bool) {
	kind := daySlot(w) / slotsPerDay
	if c := &a.stand[kind]; c.folds == a.folds && c.valid {
		return c.nd, c.ok
	}
	nd, ok := a.episodes(kind)
	a.stand[kind] = standCache{folds: a.folds, valid: true, nd: nd, ok: ok}
	return nd, ok
}

type standCache struct {
	folds int
	valid bool
	nd    need
	ok    bool
}

// episodes finds the episodes of the daily profile of kind and returns the
// largest need when two or more of them are large.
func (a *arrivals) episodes(kind int) (need, bool) {
	base := kind * slotsPerDay
	// Start the circular scan at the last slot of a quiet run at least
	// episodeGap long, so that an episode across midnight is one.
	first, run := -1, 0
	for i := range 2 * slotsPerDay {
		if a.m.DayRate[base+i%slotsPerDay] >= activeRate {
			run = 0
			continue
		}
		if run++; run >= episodeGap {
			first = i % slotsPerDay
			break
		}
	}
	if first < 0 || a.m.DaySeen[base] == 0 {
		return need{}, false // never quiet that long, or not seen
	}
	var eps []need
	var cur need
	in, quiet := false, 0
	for k := 1; k <= slotsPerDay; k++ {
		d := base + (first+k)%slotsPerDay
		if a.m.DayRate[d] >= activeRate {
			if !in || quiet >= episodeGap {
				if in {
					eps = append(eps, cur)
				}
				cur, in = need{}, true
			}
			quiet = 0
			cur = need{Tier: max(cur.Tier, a.m.DayBurst[d]), Hot: max(cur.Hot, a.m.DayHot[d])}
			continue
		}
		quiet++
	}
	if in {
		eps = append(eps, cur)
	}
	var top need
	for _, e := range eps {
		top = need{Tier: max(top.Tier, e.Tier), Hot: max(top.Hot, e.Hot)}
	}
	large := 0
	for _, e := range eps {
		if e.Tier >= top.Tier/2 && e.Tier >= 2 {
			large++
		}
	}
	return top, large >= 2
}
