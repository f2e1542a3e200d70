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
// separated by at least episodeGap of quiet slots. When a kind of day saw
// two or more large episodes (a need of at least half its largest), the
// largest need is held all day on that kind of day. An episode of at most
// clusterSlots counts each of its large bursts (busy slots with quiet ones
// between) as one: the first two bursts of the pattern wait a boot, or the
// second finds the envelope's pool, and the third does not. One episode
// (an office day, however long; a nightly burst at a set time) holds
// nothing: the profile sizes it where it comes.

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
	var eps []episode
	var cur episode
	in, quiet := false, 0
	for k := 1; k <= slotsPerDay; k++ {
		d := base + (first+k)%slotsPerDay
		if a.m.DayRate[d] < activeRate {
			quiet++
			continue
		}
		if !in || quiet >= episodeGap {
			if in {
				eps = append(eps, cur)
			}
			cur, in = episode{start: k}, true
		}
		if quiet > 0 || len(cur.peaks) == 0 {
			cur.peaks = append(cur.peaks, 0) // a new burst within the episode
		}
		quiet = 0
		cur.end = k
		cur.need = need{Tier: max(cur.need.Tier, a.m.DayBurst[d]), Hot: max(cur.need.Hot, a.m.DayHot[d])}
		cur.peaks[len(cur.peaks)-1] = max(cur.peaks[len(cur.peaks)-1], a.m.DayBurst[d])
	}
	if in {
		eps = append(eps, cur)
	}
	var top need
	for _, e := range eps {
		top = need{Tier: max(top.Tier, e.need.Tier), Hot: max(top.Hot, e.need.Hot)}
	}
	large := 0
	for _, e := range eps {
		large += e.large(top.Tier)
	}
	return top, large >= 2
}

// episode is a run of busy slots of a daily profile: its span (slots from
// the scan's start), its need, and the largest burst need of each run of
// busy slots within it (separated by quiet slots, fewer than episodeGap).
type episode struct {
	start, end int
	need       need
	peaks      []float64
}

// clusterSlots is the longest episode whose separate bursts each count as
// an episode of their own: three hours. Two batches of a weekend's pattern
// an hour or two apart are two bursts of it, and the third must find a
// pool; a working day is longer (office's 9 hours, the shortest of the
// generated shapes), so its builds with quiet slots between them stay one
// episode. Only the first hours of a day never seen split so, while the
// envelope holds their surprises anyway.
const clusterSlots = 3 * 4

// large is how many large episodes e counts as, for a largest need of top:
// none if it is small; one, or in a short episode one per large burst.
func (e episode) large(top float64) int {
	if e.need.Tier < top/2 || e.need.Tier < 2 {
		return 0
	}
	if e.end-e.start+1 > clusterSlots {
		return 1
	}
	n := 0
	for _, p := range e.peaks {
		if p >= top/2 && p >= 2 {
			n++
		}
	}
	return max(n, 1)
}
