package scaler

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// The arrival model: what berth has learned about when jobs arrive, so that
// target_wait sizing can resume or boot instances before the usual burst
// instead of after it. It is deliberately simple enough to explain in one
// log line: a profile of arrival rate and burst size per 15-minute slot of
// the week (and, until a weekday has been seen, per slot of the day), plus
// an exponentially weighted recent rate. No wall clock: every update and
// forecast takes the core's time.

const (
	// profileSlot is the width of one profile slot: short enough to follow
	// a working day, long enough that a slot sees a few bursts.
	profileSlot   = 15 * time.Minute
	slotsPerDay   = int(24 * time.Hour / profileSlot)
	slotsPerWeek  = 7 * slotsPerDay
	profileWeight = 0.5 // weight of the newest observation of a slot
	// recentTau is the time constant of the recent rate: a burst raises it
	// at once and it decays over about ten minutes.
	recentTau = 10 * time.Minute
	// releaseTau is the time constant of the release rate, which tells how
	// many busy instances come back to the pools soon.
	releaseTau = 5 * time.Minute
)

// ArrivalModel is the durable part of the arrival model, persisted with the
// core's State so that a restart does not forget the week it learned.
// Slices are indexed by slot: Week by weekday (Sunday = 0) × slot of the
// day, Day by slot of the day (UTC).
type ArrivalModel struct {
	// WeekRate and DayRate are arrivals per second, averaged per slot.
	WeekRate []float64 `json:"week_rate"`
	DayRate  []float64 `json:"day_rate"`
	// WeekBurst and DayBurst are the largest number of arrivals within one
	// second seen in a slot, averaged over the times the slot was seen.
	WeekBurst []float64 `json:"week_burst"`
	DayBurst  []float64 `json:"day_burst"`
	// WeekSeen and DaySeen count how often each slot was observed.
	WeekSeen []int `json:"week_seen"`
	DaySeen  []int `json:"day_seen"`

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

// arrivals is the live model: the durable profile plus the slot and second
// being counted now and the recent rate.
type arrivals struct {
	m ArrivalModel

	slotStart time.Time // start of the slot being counted; zero before the first arrival
	slotCount int
	slotBurst int
	secs      []int // arrivals per busy second of the slot, for its cover
	coverN    int   // slotCount when coverV was computed
	coverV    int
	prevCover float64 // cover of the last slot that ended
	secStart  time.Time
	secCount  int

	recent   float64 // arrivals per second, exponentially weighted
	releases float64 // jobs ending per second, exponentially weighted
	recentAt time.Time
	changed  bool          // the durable profile changed since the last State
	loaded   bool          // a persisted model was loaded
	snap     *ArrivalModel // the last snapshot, until the profile changes
	folded   bool          // a slot was folded into the profile
}

func newArrivals() *arrivals {
	a := &arrivals{}
	a.m.WeekRate = make([]float64, slotsPerWeek)
	a.m.WeekBurst = make([]float64, slotsPerWeek)
	a.m.WeekSeen = make([]int, slotsPerWeek)
	a.m.DayRate = make([]float64, slotsPerDay)
	a.m.DayBurst = make([]float64, slotsPerDay)
	a.m.DaySeen = make([]int, slotsPerDay)
	return a
}

// load takes a persisted model, ignoring one of the wrong shape (a model
// is only an optimisation: better to relearn than to refuse to start).
func (a *arrivals) load(m *ArrivalModel) {
	if m == nil || len(m.WeekRate) != slotsPerWeek || len(m.WeekBurst) != slotsPerWeek ||
		len(m.WeekSeen) != slotsPerWeek || len(m.DayRate) != slotsPerDay ||
		len(m.DayBurst) != slotsPerDay || len(m.DaySeen) != slotsPerDay {
		return
	}
	copy(a.m.WeekRate, m.WeekRate)
	copy(a.m.WeekBurst, m.WeekBurst)
	copy(a.m.WeekSeen, m.WeekSeen)
	copy(a.m.DayRate, m.DayRate)
	copy(a.m.DayBurst, m.DayBurst)
	copy(a.m.DaySeen, m.DaySeen)
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
		WeekRate: append([]float64(nil), a.m.WeekRate...), WeekBurst: append([]float64(nil), a.m.WeekBurst...),
		WeekSeen: append([]int(nil), a.m.WeekSeen...), DayRate: append([]float64(nil), a.m.DayRate...),
		DayBurst: append([]float64(nil), a.m.DayBurst...), DaySeen: append([]int(nil), a.m.DaySeen...),
	}
	m.raw, _ = json.Marshal((*arrivalModelJSON)(&m)) // slices of numbers always encode
	a.snap = &m
	return a.snap
}

// coverShare is the share of arrivals a pool may leave uncovered: the p95
// target lets 5 % of jobs wait longer. Fewer than that wait a whole boot in
// practice, since instances coming back from jobs and refills under way
// serve part of a burst's overflow (measured on the Travis week).
const coverShare = 0.05

// minCoverArrivals is how many arrivals a slot needs before its own cover
// counts in a forecast.
const minCoverArrivals = 100

// cover is the smallest pool that covers the bursts of the current slot
// but for coverShare of its arrivals: the jobs of a burst beyond the pool
// wait a boot. It is the job-weighted quantile of burst sizes, which bursts
// of a hundred jobs pull up only as far as their jobs matter for the p95.
func (a *arrivals) cover() int {
	// Recompute as the slot grows by a tenth: exact enough for a sizing
	// decision, and it keeps a burst of arrivals O(1) each.
	if a.slotCount <= a.coverN+a.coverN/10 && a.coverN > 0 || a.slotCount == 0 {
		return a.coverV
	}
	allowed := coverShare * float64(a.slotCount)
	lo, hi := 0, a.slotBurst
	for lo < hi {
		p := (lo + hi) / 2
		over := 0
		for _, b := range a.secs {
			over += max(b-p, 0)
		}
		if float64(over) <= allowed {
			hi = p
		} else {
			lo = p + 1
		}
	}
	a.coverN, a.coverV = a.slotCount, lo
	return lo
}

// learned reports whether the profile holds anything worth persisting: a
// slot was folded in, or a persisted model was loaded.
func (a *arrivals) learned() bool { return a.loaded || a.folded }

func weekSlot(t time.Time) int {
	t = t.UTC()
	return int(t.Weekday())*slotsPerDay + (t.Hour()*60+t.Minute())/int(profileSlot/time.Minute)
}

// roll closes every slot that ended by now, folding its counts into the
// profile. Empty slots are folded too: a quiet hour is worth learning.
func (a *arrivals) roll(now time.Time) {
	if a.slotStart.IsZero() {
		return
	}
	for n := 0; !now.Before(a.slotStart.Add(profileSlot)); n++ {
		if n >= slotsPerWeek {
			// Idle for more than a week: every slot was folded once;
			// skip ahead rather than fold the same zeros again.
			a.slotStart = now.Truncate(profileSlot)
			break
		}
		rate := float64(a.slotCount) / profileSlot.Seconds()
		burst := float64(a.cover())
		a.prevCover = burst
		w := weekSlot(a.slotStart)
		fold(&a.m.WeekRate[w], &a.m.WeekBurst[w], &a.m.WeekSeen[w], rate, burst)
		d := w % slotsPerDay
		fold(&a.m.DayRate[d], &a.m.DayBurst[d], &a.m.DaySeen[d], rate, burst)
		a.slotStart = a.slotStart.Add(profileSlot)
		a.slotCount, a.slotBurst = 0, 0
		a.secs = a.secs[:0]
		a.secStart, a.secCount = time.Time{}, 0 // a new slot starts a new second
		a.coverN, a.coverV = 0, 0
		a.changed = true
		a.folded = true
		a.snap = nil
	}
}

func fold(rate, burst *float64, seen *int, r, b float64) {
	if *seen == 0 {
		*rate, *burst = r, b
	} else {
		*rate += profileWeight * (r - *rate)
		*burst += profileWeight * (b - *burst)
	}
	*seen++
}

// record counts n arrivals at now.
func (a *arrivals) record(now time.Time, n int) {
	if a.slotStart.IsZero() {
		a.slotStart = now.Truncate(profileSlot)
	}
	a.roll(now)
	a.decay(now)
	a.recent += float64(n) / recentTau.Seconds()
	if now.Sub(a.secStart) >= time.Second {
		a.secStart, a.secCount = now, 0
		a.secs = append(a.secs, 0)
	}
	a.secCount += n
	a.secs[len(a.secs)-1] = a.secCount
	a.slotCount += n
	a.slotBurst = max(a.slotBurst, a.secCount)
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

// release counts a job that ended at now.
func (a *arrivals) release(now time.Time) {
	a.decay(now)
	a.releases += 1 / releaseTau.Seconds()
}

// returning is how many busy instances are expected back within d, from the
// recent release rate.
func (a *arrivals) returning(now time.Time, d time.Duration) float64 {
	a.decay(now)
	return a.releases * d.Seconds()
}

// forecast is the expected arrival rate and largest burst from now to
// now+horizon (at least the next slot), with where the numbers came from.
type forecast struct {
	Rate   float64 // arrivals per second
	Burst  float64 // arrivals within one second
	Source string
}

func (f forecast) String() string {
	return fmt.Sprintf("rate=%.3f/s burst=%.0f from %s", f.Rate, f.Burst, f.Source)
}

func (a *arrivals) forecast(now time.Time, horizon time.Duration) forecast {
	a.roll(now)
	a.decay(now)
	// The slot being counted speaks only once it has seen a few bursts:
	// the first burst of a quiet slot would otherwise size the pool by
	// itself; until then the last slot stands for the recent past.
	cur := a.prevCover
	if a.slotCount >= minCoverArrivals {
		cur = max(cur, float64(a.cover()))
	}
	f := forecast{Rate: a.recent, Burst: cur, Source: "recent arrivals"}
	horizon = max(horizon, profileSlot)
	for t := now; !t.After(now.Add(horizon)); t = t.Add(profileSlot) {
		w := weekSlot(t)
		d := w % slotsPerDay
		rate, burst, src := a.m.DayRate[d], a.m.DayBurst[d], "daily profile"
		if a.m.WeekSeen[w] > 0 {
			rate, burst, src = a.m.WeekRate[w], a.m.WeekBurst[w], "weekday profile"
		} else if a.m.DaySeen[d] == 0 {
			continue
		}
		if rate > f.Rate || burst > f.Burst {
			f.Source = src + " at " + t.UTC().Format("Mon 15:04")
		}
		f.Rate = max(f.Rate, rate)
		f.Burst = max(f.Burst, burst)
	}
	return f
}
