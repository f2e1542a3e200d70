package scaler

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"
)

// The arrival model: what berth has learned about when jobs arrive, so that
// target_wait sizing can resume or boot instances before the usual burst
// instead of after it. No wall clock: every update and forecast takes the
// core's time.
//
// The quantity it learns is the one a pool must cover: for every arriving
// job, how many jobs arrived within the capacity horizon before it (itself
// included) net of the jobs that ended in that time, since those hand their
// instances back. A pool of that size serves the job without waiting for a
// boot. A burst counts whatever its spread (one second or two minutes), and
// the arrival rate enters through the count: ten arrivals a second over a
// 45 s horizon are 450 jobs to cover. Two horizons are counted, the tier's
// (capacity a boot brings too late for the target) and the hot pool's
// (capacity a resume brings too late); sizing (tier.go) turns them into
// pools.
//
// Per 15-minute slot of the week and per slot of the day (weekdays and
// weekends apart) the model keeps an upper quantile of that count: the
// slot's job-weighted 95th percentile, folded in with a fast rise and a slow
// fall, so that it follows the large builds a p95 depends on rather than the
// average one, and a quiet slot lowers it by a tenth instead of to zero.

const (
	// profileSlot is the width of one profile slot: short enough to follow
	// a working day, long enough that a slot sees a few builds.
	profileSlot  = 15 * time.Minute
	slotsPerDay  = int(24 * time.Hour / profileSlot)
	slotsPerWeek = 7 * slotsPerDay
	// dayKinds splits the daily profile into weekdays and weekends: pooling
	// Monday to Friday learns a working day in a day, and a quiet Saturday
	// does not teach Monday to be quiet.
	dayKinds = 2
	// fallWeight folds a slot's new need into its profile when it is
	// smaller: a larger need is taken at once (a p95 is made by the large
	// builds), a smaller one is learned slowly, a tenth of the way each
	// time, so that one quiet day or slot does not empty the pool.
	fallWeight = 0.15
	// neighbourSlots is how many slots on each side pool their needs into
	// a slot's (30 minutes either way).
	neighbourSlots = 2
	// gapSlots is the longest quiet gap between arrivals that still counts
	// as busy hours for pooling (an hour: office builds every ~20 minutes
	// leave such gaps; the hours after a 02:00 burst are not busy).
	gapSlots = 4
	// priorWeight is what the daily profile weighs against each time the
	// slot was seen on its own weekday (up to maxWeekWeight of them).
	priorWeight   = 1.0
	maxWeekWeight = 4
	// minCurrentJobs is how many arrivals the slot being counted needs
	// before its own need counts: a lone first job says little.
	minCurrentJobs = 20
	// recentTau is the time constant of the recent rate, for logs.
	recentTau = 10 * time.Minute
	// releaseTau is the time constant of the release rate, which tells how
	// many busy instances come back to the pools soon.
	releaseTau = 5 * time.Minute
)

// coverShare is the share of arrivals a pool may leave uncovered: the p95
// target lets 5 % of jobs wait longer.
const coverShare = 0.05

// ArrivalModel is the durable part of the arrival model, persisted with the
// core's State so that a restart does not forget the weeks it learned.
// Week slices are indexed by weekday (Sunday = 0) × slot of the day; Day
// slices by day kind (0 weekday, 1 weekend) × slot of the day (UTC).
type ArrivalModel struct {
	// WeekRate and DayRate are arrivals per second, averaged per slot.
	WeekRate []float64 `json:"week_rate"`
	DayRate  []float64 `json:"day_rate"`
	// WeekBurst and DayBurst are the upper quantile of the jobs arriving
	// within the tier's horizon (net of jobs ending), per slot.
	WeekBurst []float64 `json:"week_burst"`
	DayBurst  []float64 `json:"day_burst"`
	// WeekHot and DayHot are the same within the hot pool's horizon.
	WeekHot []float64 `json:"week_hot"`
	DayHot  []float64 `json:"day_hot"`
	// WeekDrain and DayDrain are the upper quantile of how far the pool
	// was drawn down (jobs arriving net of jobs ending) within the break-
	// even time before each arrival, per slot (drain.go). A model saved
	// without them learns them afresh.
	WeekDrain []float64 `json:"week_drain,omitempty"`
	DayDrain  []float64 `json:"day_drain,omitempty"`
	// WeekSeen and DaySeen count how often each slot was observed.
	WeekSeen []int `json:"week_seen"`
	DaySeen  []int `json:"day_seen"`
	// Zone is the time zone the slots are counted in (Config.ProfileZone),
	// empty for UTC. A model of another zone is relearned, not loaded: its
	// slots would stand hours away from the hours they learned.
	Zone string `json:"zone,omitempty"`

	// raw is the JSON of a snapshot, encoded once when it was taken: the
	// model changes every 15 minutes but State is saved on every event.
	raw []byte
}

// arrivalModelJSON is ArrivalModel without its MarshalJSON.
type arrivalModelJSON ArrivalModel

// MarshalJSON encodes the model, reusing the encoding of a snapshot.
func (m *ArrivalModel) MarshalJSON() ([]byte, error) {
	if m.raw != nil {
		return m.raw, nil
	}
	return json.Marshal((*arrivalModelJSON)(m))
}

// need is what a pool must cover: jobs within the tier's horizon (Tier) and
// within the hot pool's (Hot); and how deep the pool is drawn within the
// break-even time (Drain, drain.go).
type need struct{ Tier, Hot, Drain float64 }

// arrivals is the live model: the durable profile plus the slot being
// counted now, the window of recent arrivals and releases, and the rates.
type arrivals struct {
	m ArrivalModel

	// tierH and hotH are the horizons counted, set by the sizing from the
	// boot and resume times and the target (sizing.go).
	tierH, hotH time.Duration
	win         window
	drain       drawdown

	slotStart  time.Time // start of the slot being counted; zero before the first arrival
	slotCount  int
	tierNeeds  []int32 // per arriving job of the slot, its count within tierH
	hotNeeds   []int32
	drainNeeds []int32
	curN       int // slotCount when cur was computed
	cur        need
	prev       need // need of the last slot that ended

	// trust is how far the tier's refill counts on busy instances coming
	// back, 0 to 1 when used (it runs from -1 to 2, refill.go); it is
	// learned again after a restart.
	trust float64

	recent   float64 // arrivals per second, exponentially weighted
	releases float64 // jobs ending per second, exponentially weighted
	recentAt time.Time
	changed  bool           // the durable profile changed since the last State
	loaded   bool           // a persisted model was loaded
	snap     *ArrivalModel  // the last snapshot, until the profile changes
	zone     *time.Location // the zone slots are counted in (Config.ProfileZone)
	folded   bool           // a slot was folded into the profile
	folds    int            // slots folded so far

	// lastCounts holds the arrivals of the last unlikeSlots slots that
	// ended, and lastExpected what the profile expected of each before it
	// learned from it (−1: not seen), by slot (unlike.go).
	lastCounts   [unlikeSlots]int
	lastExpected [unlikeSlots]float64

	env      envelope             // surprises of the last hour (envelope.go)
	events   int                  // arrivals and releases counted, for learnGen (learned.go)
	steers   int                  // waits that steered the trust, for learnGen
	floors   floorCounts          // arrivals of the last hours (floor.go)
	stand    [dayKinds]standCache // standing needs (standing.go)
	expSlot  int                  // week slot whose profiled need is in expected
	expFolds int                  // folds when expected was computed
	expected need
}

func newArrivals(zone *time.Location) *arrivals {
	if zone == nil {
		zone = time.UTC
	}
	a := &arrivals{tierH: time.Minute, trust: 0.5, expSlot: -1, zone: zone}
	a.forgetLastHour()
	a.m.WeekRate = make([]float64, slotsPerWeek)
	a.m.WeekBurst = make([]float64, slotsPerWeek)
	a.m.WeekHot = make([]float64, slotsPerWeek)
	a.m.WeekDrain = make([]float64, slotsPerWeek)
	a.m.WeekSeen = make([]int, slotsPerWeek)
	a.m.DayRate = make([]float64, dayKinds*slotsPerDay)
	a.m.DayBurst = make([]float64, dayKinds*slotsPerDay)
	a.m.DayHot = make([]float64, dayKinds*slotsPerDay)
	a.m.DayDrain = make([]float64, dayKinds*slotsPerDay)
	a.m.DaySeen = make([]int, dayKinds*slotsPerDay)
	return a
}

// load takes a persisted model, ignoring one of the wrong shape (a model
// is only an optimisation: better to relearn than to refuse to start; a
// model of an older berth, which counted other things, is relearned too).
func (a *arrivals) load(m *ArrivalModel) {
	const d = dayKinds * slotsPerDay
	if m == nil || m.Zone != zoneName(a.zone) || len(m.WeekRate) != slotsPerWeek || len(m.WeekBurst) != slotsPerWeek ||
		len(m.WeekHot) != slotsPerWeek || len(m.WeekSeen) != slotsPerWeek || len(m.DayRate) != d ||
		len(m.DayBurst) != d || len(m.DayHot) != d || len(m.DaySeen) != d {
		return
	}
	copy(a.m.WeekRate, m.WeekRate)
	copy(a.m.WeekBurst, m.WeekBurst)
	copy(a.m.WeekHot, m.WeekHot)
	copy(a.m.WeekSeen, m.WeekSeen)
	copy(a.m.DayRate, m.DayRate)
	copy(a.m.DayBurst, m.DayBurst)
	copy(a.m.DayHot, m.DayHot)
	copy(a.m.DaySeen, m.DaySeen)
	if len(m.WeekDrain) == slotsPerWeek && len(m.DayDrain) == d {
		copy(a.m.WeekDrain, m.WeekDrain)
		copy(a.m.DayDrain, m.DayDrain)
	}
	a.loaded = true
	a.snap = nil
}

// snapshot returns the durable model. It is shared and immutable: the same
// pointer comes back until the profile changes, so a store can tell that
// it has nothing new to write.
func (a *arrivals) snapshot() *ArrivalModel {
	if a.snap != nil {
		return a.snap
	}
	m := ArrivalModel{
		WeekRate: slices.Clone(a.m.WeekRate), WeekBurst: slices.Clone(a.m.WeekBurst),
		WeekHot: slices.Clone(a.m.WeekHot), WeekSeen: slices.Clone(a.m.WeekSeen),
		DayRate: slices.Clone(a.m.DayRate), DayBurst: slices.Clone(a.m.DayBurst),
		DayHot: slices.Clone(a.m.DayHot), DaySeen: slices.Clone(a.m.DaySeen),
		WeekDrain: slices.Clone(a.m.WeekDrain), DayDrain: slices.Clone(a.m.DayDrain),
		Zone: zoneName(a.zone),
	}
	m.raw, _ = json.Marshal((*arrivalModelJSON)(&m)) // slices of numbers always encode
	a.snap = &m
	return a.snap
}

// learned reports whether the profile holds anything worth persisting: a
// slot was folded in, or a persisted model was loaded.
func (a *arrivals) learned() bool { return a.loaded || a.folded }

// weekSlot is the profile's index for the slot of the week holding t, in
// the profile's zone: a team's 9:00 stays its slot across a daylight-saving
// change. Slots start on UTC quarter hours (Truncate), which are quarter
// hours in every zone in use.
func (a *arrivals) weekSlot(t time.Time) int {
	t = t.In(a.zone)
	return int(t.Weekday())*slotsPerDay + (t.Hour()*60+t.Minute())/int(profileSlot/time.Minute)
}

// daySlot is the daily profile's index for week slot w.
func daySlot(w int) int {
	kind := 0
	if wd := time.Weekday(w / slotsPerDay); wd == time.Saturday || wd == time.Sunday {
		kind = 1
	}
	return kind*slotsPerDay + w%slotsPerDay
}

// setHorizons sets the horizons counted from now on. Counts already taken
// keep the horizons they were taken with: the times change slowly.
func (a *arrivals) setHorizons(tier, hot time.Duration) {
	a.tierH, a.hotH = max(tier, 0), max(min(hot, tier), 0)
}

// slotQuantiles is the need of the slot being counted: the upper quantile
// of each count its jobs took.
func (a *arrivals) slotQuantiles() need {
	return need{Tier: upperQuantile(a.tierNeeds), Hot: upperQuantile(a.hotNeeds), Drain: upperQuantile(a.drainNeeds)}
}

// current is the need of the slot being counted, once it has seen enough
// arrivals. Recomputed as the slot grows by a tenth: exact enough for a
// sizing decision, and it keeps a burst of arrivals O(1) each.
func (a *arrivals) current() need {
	if a.slotCount < minCurrentJobs {
		return need{}
	}
	if a.curN == 0 || a.slotCount > a.curN+a.curN/10 {
		a.cur = a.slotQuantiles()
		a.curN = a.slotCount
	}
	return a.cur
}

// upperQuantile is the job-weighted 95th percentile of the counts: the
// pool that serves all but coverShare of the jobs. It sorts v.
func upperQuantile(v []int32) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	k := int(math.Ceil((1-coverShare)*float64(len(v)))) - 1
	return float64(v[min(max(k, 0), len(v)-1)])
}

// roll closes every slot that ended by now, folding its need into the
// profile. Empty slots are folded too: a quiet slot lowers the profile, by
// fallWeight of the way.
func (a *arrivals) roll(now time.Time) {
	if a.slotStart.IsZero() {
		return
	}
	for n := 0; !now.Before(a.slotStart.Add(profileSlot)); n++ {
		if n >= slotsPerWeek {
			// Idle for more than a week: every slot was folded once;
			// skip ahead rather than fold the same zeros again.
			a.slotStart = now.Truncate(profileSlot)
			a.forgetLastHour()
			break
		}
		a.curN = 0
		nd := a.slotQuantiles()
		rate := float64(a.slotCount) / profileSlot.Seconds()
		a.prev = nd
		w := a.weekSlot(a.slotStart)
		d := daySlot(w)
		a.lastCounts[a.folds%unlikeSlots] = a.slotCount
		a.lastExpected[a.folds%unlikeSlots] = a.expectedArrivals(w)
		foldNeed(&a.m.WeekRate[w], &a.m.WeekBurst[w], &a.m.WeekHot[w], &a.m.WeekDrain[w], &a.m.WeekSeen[w], rate, nd)
		foldNeed(&a.m.DayRate[d], &a.m.DayBurst[d], &a.m.DayHot[d], &a.m.DayDrain[d], &a.m.DaySeen[d], rate, nd)
		a.slotStart = a.slotStart.Add(profileSlot)
		a.slotCount = 0
		a.tierNeeds, a.hotNeeds, a.drainNeeds = a.tierNeeds[:0], a.hotNeeds[:0], a.drainNeeds[:0]
		a.changed = true
		a.folded = true
		a.folds++
		a.snap = nil
	}
}

// foldNeed folds a slot's need into a profile entry; an entry not seen yet
// takes it as it is.
func foldNeed(rate, tier, hot, drain *float64, seen *int, r float64, nd need) {
	if *seen == 0 {
		*rate, *tier, *hot, *drain = r, nd.Tier, nd.Hot, nd.Drain
	} else {
		*rate += 0.5 * (r - *rate)
		foldUpper(tier, nd.Tier)
		foldUpper(hot, nd.Hot)
		foldUpper(drain, nd.Drain)
	}
	*seen++
}

// foldUpper moves v towards x: most of the way up, a little way down.
func foldUpper(v *float64, x float64) {
	if x > *v {
		*v = x
	} else {
		*v += fallWeight * (x - *v)
	}
}

// record counts n arrivals at now: each is a job the pool must serve, and
// its need is what arrived within the horizons before it, net of releases.
func (a *arrivals) record(now time.Time, n int) {
	if a.slotStart.IsZero() {
		a.slotStart = now.Truncate(profileSlot)
	}
	a.roll(now)
	a.decay(now)
	a.events++
	a.recent += float64(n) / recentTau.Seconds()
	a.win.trim(now, a.tierH, a.hotH)
	for range n {
		a.win.add(now, 1)
		tn, hn := horizonNeed(a.tierH, a.win.tierNet), horizonNeed(a.hotH, a.win.hotNet)
		a.tierNeeds = append(a.tierNeeds, tn)
		a.hotNeeds = append(a.hotNeeds, hn)
		a.surprise(now, tn, hn)
		if tn <= 1 {
			a.floors.add(now, 1) // a lone arrival (floor.go)
		}
		a.drainNeeds = append(a.drainNeeds, a.drain.add(now, 1))
	}
	a.slotCount += n
}

// horizonNeed is a job's need within a horizon: none when the horizon is
// empty (the capacity started at its arrival meets the target), else the
// net arrivals counted.
func horizonNeed(h time.Duration, net int) int32 {
	if h <= 0 {
		return 0
	}
	return int32(max(net, 0))
}

func (a *arrivals) decay(now time.Time) {
	if !a.recentAt.IsZero() && now.After(a.recentAt) {
		dt := now.Sub(a.recentAt).Seconds()
		a.recent *= math.Exp(-dt / recentTau.Seconds())
		a.releases *= math.Exp(-dt / releaseTau.Seconds())
	}
	if now.After(a.recentAt) {
		a.recentAt = now
	}
}

// release counts a job that ended at now: its instance comes back, and the
// jobs arriving after it need one less.
func (a *arrivals) release(now time.Time) {
	a.decay(now)
	a.releases += 1 / releaseTau.Seconds()
	a.events++
	a.win.trim(now, a.tierH, a.hotH)
	a.win.add(now, -1)
	a.drain.add(now, -1)
}

// returning is how many busy instances are expected back within d, from the
// recent release rate.
func (a *arrivals) returning(now time.Time, d time.Duration) float64 {
	a.decay(now)
	return a.releases * d.Seconds()
}

// forecast is the need from now to now+lead: the largest of the recent
// need and the profile's for every slot in that time, with where it came
// from.
type forecast struct {
	Rate   float64 // arrivals per second, recent
	Burst  float64 // jobs within the tier's horizon to cover
	Hot    float64 // jobs within the hot pool's horizon to cover
	Drain  float64 // how deep the pool is drawn within the break-even time
	Source string
}

func (f forecast) String() string {
	return fmt.Sprintf("rate=%.3f/s burst=%.0f hot=%.0f from %s", f.Rate, f.Burst, f.Hot, f.Source)
}

func (a *arrivals) forecast(now time.Time, lead time.Duration) forecast {
	a.roll(now)
	a.decay(now)
	// The recent past stands for the next minutes: the last slot that
	// ended (within busy hours, see stillBusy), and the one being counted
	// once it has seen enough jobs.
	cur := a.current()
	prev := a.prev
	if !a.stillBusy(a.weekSlot(now)) {
		prev = need{}
	}
	f := forecast{Rate: a.recent, Burst: max(prev.Tier, cur.Tier), Hot: max(prev.Hot, cur.Hot),
		Drain: max(prev.Drain, cur.Drain), Source: "recent arrivals"}
	for t := now.Truncate(profileSlot); !t.After(now.Add(lead)); t = t.Add(profileSlot) {
		nd, src, ok := a.profiled(a.weekSlot(t))
		if !ok {
			continue
		}
		if nd.Tier > f.Burst || nd.Hot > f.Hot {
			f.Source = src + " at " + t.In(a.zone).Format("Mon 15:04")
		}
		f.Burst = max(f.Burst, nd.Tier)
		f.Hot = max(f.Hot, nd.Hot)
		f.Drain = max(f.Drain, nd.Drain)
	}
	return f
}

// profiled is the need the profile holds for week slot w: the largest of
// its own and its neighbours' within neighbourSlots. Builds that come at
// random times of a busy morning fall into one slot or the next by chance:
// pooling the neighbours covers the morning's large builds in every slot of
// it, not only in those that happened to see one.
func (a *arrivals) profiled(w int) (need, string, bool) {
	own, src, ok := a.slotNeed(w)
	if !a.borrows(w) {
		return own, src, ok
	}
	self, selfRate := own, a.slotRate(w)
	var nbs need // the neighbours' largest needs
	nbRate := 0.0
	for k := -neighbourSlots; k <= neighbourSlots; k++ {
		nb, _, okn := a.slotNeed((w + slotsPerWeek + k) % slotsPerWeek)
		if k == 0 || !okn {
			continue
		}
		nbs = need{Tier: max(nbs.Tier, nb.Tier), Hot: max(nbs.Hot, nb.Hot)}
		nbRate = max(nbRate, a.slotRate((w+slotsPerWeek+k)%slotsPerWeek))
		if nb.Tier <= own.Tier && nb.Hot <= own.Hot && nb.Drain <= own.Drain {
			continue
		}
		if nb.Tier > own.Tier || nb.Hot > own.Hot || !ok {
			src = "neighbouring slots" // the source of the pools' sizes
		}
		own = need{Tier: max(own.Tier, nb.Tier), Hot: max(own.Hot, nb.Hot), Drain: max(own.Drain, nb.Drain)}
		ok = true
	}
	if ok && self.Tier >= setBurstRatio*nbs.Tier && selfRate >= setBurstRateRatio*nbRate && nbs.Tier >= minSetBurstBuild &&
		a.largestOfDay(w) {
		// A burst at a set time within busy hours: a build of the busy
		// hours may come on top of it (setburst.go).
		own.Tier = self.Tier + nbs.Tier
		own.Hot = max(own.Hot, self.Hot+nbs.Hot)
		src = "a set-time burst with a build on top"
	}
	return own, src, ok
}

// borrows reports whether week slot w pools its neighbours' needs. Pooling
// covers builds that fall into one slot or the next by chance within busy
// hours; it must not stretch a burst that comes at a set time (a 02:00
// burst pre-warmed from 01:28 and held until 02:45). A slot borrows when it
// saw arrivals itself or lies in a quiet gap of busy hours (arrivals within
// gapSlots before and after it). The start of busy hours is pre-warmed by
// the forecast's lead, not by pooling.
func (a *arrivals) borrows(w int) bool {
	if a.active(w) {
		return true
	}
	before, after := false, false
	for k := 1; k <= gapSlots; k++ {
		before = before || a.active((w+slotsPerWeek-k)%slotsPerWeek)
		after = after || a.active((w+k)%slotsPerWeek)
	}
	return before && after
}

// stillBusy reports whether the last slot's need still speaks for week slot
// w: unless the profile saw w and w lies outside busy hours. The slot after
// a burst at a set time holds no pool for it; with no profile yet, the
// recent past is all there is.
func (a *arrivals) stillBusy(w int) bool {
	d := daySlot(w)
	return a.m.DaySeen[d] == 0 || a.borrows(w)
}

// active reports whether week slot w saw arrivals, on its weekday or (the
// prior) on its kind of day.
func (a *arrivals) active(w int) bool {
	d := a.priorDay(w)
	return a.m.WeekRate[w] > 0 || a.m.DayRate[d] > 0
}

// priorDay is the daily profile's index that stands as the prior for week
// slot w: its kind of day's, or while that kind was not seen yet (the
// first weekend) the other kind's: better a pool too many on the first
// Saturday than a missed 02:00 build.
func (a *arrivals) priorDay(w int) int {
	d := daySlot(w)
	if a.m.DaySeen[d] == 0 {
		d = (d + slotsPerDay) % (dayKinds * slotsPerDay)
	}
	return d
}

// slotNeed is one slot's need: the weekday profile blended with the daily
// profile of its kind of day, which stands as the prior until the weekday
// was seen a few times.
func (a *arrivals) slotNeed(w int) (need, string, bool) {
	d := a.priorDay(w)
	if a.m.DaySeen[d] == 0 {
		return need{}, "", false
	}
	src := "daily profile"
	if a.m.WeekSeen[w] > 0 {
		src = "weekday profile"
	}
	return need{Tier: a.blended(w, d, a.m.WeekBurst, a.m.DayBurst), Hot: a.blended(w, d, a.m.WeekHot, a.m.DayHot),
		Drain: a.blended(w, d, a.m.WeekDrain, a.m.DayDrain)}, src, true
}

// blended is week slot w's value of a weekday profile (week) blended with
// daily profile slot d's (day): the daily one weighs priorWeight against
// each time the weekday was seen, up to maxWeekWeight.
func (a *arrivals) blended(w, d int, week, day []float64) float64 {
	seen := min(a.m.WeekSeen[w], maxWeekWeight)
	if seen == 0 {
		return day[d]
	}
	k := float64(seen)
	return (k*week[w] + priorWeight*day[d]) / (k + priorWeight)
}

// window counts arrivals net of releases within the two horizons before
// now. Events are kept in time order; each horizon has its own head, and
// both trim in O(1) amortised.
type window struct {
	ev              []winEvent
	tierHead        int
	hotHead         int
	tierNet, hotNet int
}

type winEvent struct {
	at time.Time
	d  int // +1 an arrival, -1 a release
}

func (w *window) add(at time.Time, d int) {
	w.ev = append(w.ev, winEvent{at: at, d: d})
	w.tierNet += d
	w.hotNet += d
}

// trim drops events at or before now−horizon from each count (events of
// the instant now stay).
func (w *window) trim(now time.Time, tierH, hotH time.Duration) {
	for w.hotHead < len(w.ev) && !w.ev[w.hotHead].at.After(now.Add(-hotH)) && w.ev[w.hotHead].at.Before(now) {
		w.hotNet -= w.ev[w.hotHead].d
		w.hotHead++
	}
	for w.tierHead < len(w.ev) && !w.ev[w.tierHead].at.After(now.Add(-tierH)) && w.ev[w.tierHead].at.Before(now) {
		w.tierNet -= w.ev[w.tierHead].d
		w.tierHead++
	}
	if h := min(w.tierHead, w.hotHead); h > 1024 && 2*h > len(w.ev) {
		w.ev = append(w.ev[:0], w.ev[h:]...)
		w.tierHead -= h
		w.hotHead -= h
	}
}

// expectedJobs is how many more jobs the profile expects from now to
// now+d, and whether it can tell: only for a burst at a set time that has
// come, in quiet hours. Within busy hours builds come at random times (one
// slot may see two), so a quiet forecast there means little; with no
// profile yet there is none. The slot being counted expects what its
// profile holds beyond the jobs that already came; a quiet slot, none.
func (a *arrivals) expectedJobs(now time.Time, d time.Duration) (int, bool) {
	a.roll(now)
	n := 0.0
	for t := now.Truncate(profileSlot); t.Before(now.Add(d)); t = t.Add(profileSlot) {
		w := a.weekSlot(t)
		d := a.priorDay(w)
		if a.m.DaySeen[d] == 0 {
			return 0, false
		}
		if !t.Equal(a.slotStart) {
			if a.borrows(w) {
				return 0, false
			}
			continue
		}
		for k := 1; k <= neighbourSlots; k++ {
			if a.active((w+k)%slotsPerWeek) || a.active((w+slotsPerWeek-k)%slotsPerWeek) {
				return 0, false
			}
		}
		n += max(max(a.m.WeekRate[w], a.m.DayRate[d])*profileSlot.Seconds()-float64(a.slotCount), 0)
	}
	return int(math.Ceil(n)), true
}

// zoneName is how a model names its zone: empty for UTC, as models saved
// before zones were counted in UTC.
func zoneName(z *time.Location) string {
	if z == nil || z == time.UTC || z.String() == "UTC" {
		return ""
	}
	return z.String()
}
