package scaler

import (
	"encoding/json"
	"slices"
	"time"
)

// What the core learns beyond the arrival profile, across a restart.
//
// The profile (ArrivalModel) is saved with every State. The rest of what
// target_wait steers by was relearned after each restart: how long jobs run
// (the refill's learned returns need minDurations releases), the refill's
// trust (thousands of jobs to move), the boot and resume times seen, the
// last hours' arrivals (the floor for random arrivals counts eight hours,
// the check for a day unlike its profile one), the slot being counted, the
// envelope of surprises of the last 90 minutes.
// A berth restarted for an upgrade at 10:00 forgot the morning's surprise
// and held no floor until hours later. Learned carries them.
//
// It changes with every arrival and release, and State is saved on every
// event; so the core takes a snapshot at most once a learnedEvery (Tick)
// and at stop (StopScaleUp, Shutdown), and State carries the last one. A
// crash loses at most a minute of learning. Times in it are absolute: what
// the envelope and the floor counted is ignored by themselves once it is
// older than their windows, and the slot being counted and the last hour's
// slots are restored only when berth starts again within the same slot
// (else the profile has slots that nobody counted, and the comparison of
// the last hour starts afresh, as after an idle week).

// learnedEvery is how often the learned state is snapshotted for the store.
const learnedEvery = time.Minute

// Learned is the core's learned state beyond the profile, persisted with
// State (see above). A field missing from an older berth's state is learned
// afresh.
type Learned struct {
	// At is when the snapshot was taken, the core's time.
	At time.Time `json:"at"`
	// Runs is the decayed histogram of job run times (powers of two
	// seconds) and RunsN how many releases it learned (returns.go).
	Runs  []float64 `json:"runs,omitempty"`
	RunsN int       `json:"runs_n,omitempty"`
	// Trust is the refill's trust in returns (refill.go).
	Trust float64 `json:"trust"`
	// BootEstimate and ResumeEstimate are the boot and resume times seen
	// through the listings, zero if none was seen yet.
	BootEstimate   time.Duration `json:"boot_estimate,omitempty"`
	ResumeEstimate time.Duration `json:"resume_estimate,omitempty"`
	// Envelope holds the surprises of the last 90 minutes (envelope.go).
	Envelope []EnvelopeMinute `json:"envelope,omitempty"`
	// Floors holds the arrivals per 15-minute slot of the last eight hours
	// that the floor for random arrivals counts (floor.go).
	Floors []SlotArrivals `json:"floors,omitempty"`
	// Slot is the slot being counted and the last hour's slots (unlike.go).
	Slot *CountedSlot `json:"slot,omitempty"`

	raw []byte // the JSON, encoded once when the snapshot was taken
}

// EnvelopeMinute is one minute of the envelope: the largest surprise needs
// of the tier's and the hot pool's horizons.
type EnvelopeMinute struct {
	Minute int64   `json:"minute"` // Unix minutes
	Tier   float64 `json:"tier"`
	Hot    float64 `json:"hot"`
}

// SlotArrivals is the count of arrivals of one slot.
type SlotArrivals struct {
	Slot int64 `json:"slot"` // Unix time / 15 minutes
	N    int   `json:"n"`
}

// CountedSlot is the profile slot being counted when the snapshot was taken:
// the count of each arrival within the horizons, and the last hour's slots
// that ended (their arrivals and what the profile expected of them, oldest
// first, −1 where it expected nothing).
type CountedSlot struct {
	Start        time.Time  `json:"start"`
	Count        int        `json:"count"`
	TierNeeds    []int32    `json:"tier_needs,omitempty"`
	HotNeeds     []int32    `json:"hot_needs,omitempty"`
	DrainNeeds   []int32    `json:"drain_needs,omitempty"`
	Prev         [3]float64 `json:"prev"` // the last slot that ended: tier, hot, drain
	LastCounts   []int      `json:"last_counts"`
	LastExpected []float64  `json:"last_expected"`
}

type learnedJSON Learned

// MarshalJSON encodes the snapshot, reusing its encoding.
func (l *Learned) MarshalJSON() ([]byte, error) {
	if l.raw != nil {
		return l.raw, nil
	}
	return json.Marshal((*learnedJSON)(l))
}

// learnGen is a count that changes whenever the core learned something
// that Learned holds (arrivals, releases, waits, boots and resumes seen).
func (s *Scaler) learnGen() int {
	return s.arr.events + s.runs.n + s.arr.steers + s.learnedTimes
}

// snapshotLearned takes a snapshot of the learned state when it changed
// since the last one; force takes it now (at stop), else it waits for
// learnedEvery since the last. It marks the state dirty, so the caller
// saves it.
func (s *Scaler) snapshotLearned(force bool) {
	g := s.learnGen()
	if g == s.learnedGen || (!force && s.now.Sub(s.learnedAt) < learnedEvery) {
		return
	}
	s.learnedGen, s.learnedAt = g, s.now
	a := s.arr
	l := &Learned{At: s.now, Runs: slices.Clone(s.runs.w[:]), RunsN: s.runs.n, Trust: a.trust}
	if s.bootSeen {
		l.BootEstimate = s.bootEst
	}
	if s.resSeen {
		l.ResumeEstimate = s.resumeEst
	}
	m := s.now.Unix() / 60
	for i := range envelopeMinutes {
		if e := &a.env; e.min[i] > m-int64(envelopeMinutes) && e.min[i] <= m {
			l.Envelope = append(l.Envelope, EnvelopeMinute{Minute: e.min[i], Tier: e.tier[i], Hot: e.hot[i]})
		}
	}
	slices.SortFunc(l.Envelope, func(x, y EnvelopeMinute) int { return int(x.Minute - y.Minute) })
	fs := s.now.Unix() / int64(profileSlot/time.Second)
	for i := range floorBuckets {
		if c := &a.floors; c.slot[i] > fs-int64(floorBuckets) && c.slot[i] <= fs && c.n[i] > 0 {
			l.Floors = append(l.Floors, SlotArrivals{Slot: c.slot[i], N: c.n[i]})
		}
	}
	slices.SortFunc(l.Floors, func(x, y SlotArrivals) int { return int(x.Slot - y.Slot) })
	if !a.slotStart.IsZero() {
		cs := &CountedSlot{Start: a.slotStart, Count: a.slotCount, TierNeeds: slices.Clone(a.tierNeeds),
			HotNeeds: slices.Clone(a.hotNeeds), DrainNeeds: slices.Clone(a.drainNeeds),
			Prev: [3]float64{a.prev.Tier, a.prev.Hot, a.prev.Drain}}
		for k := range unlikeSlots {
			i := (a.folds + k) % unlikeSlots // oldest first
			cs.LastCounts = append(cs.LastCounts, a.lastCounts[i])
			cs.LastExpected = append(cs.LastExpected, a.lastExpected[i])
		}
		l.Slot = cs
	}
	l.raw, _ = json.Marshal((*learnedJSON)(l)) // numbers, times and slices of them always encode
	s.learned = l
	s.dirty = true
}

// loadLearned takes a persisted learned state at restore (see above). A
// part of the wrong shape is ignored: it is only learning, relearned.
func (s *Scaler) loadLearned(l *Learned) {
	if l == nil {
		return
	}
	a := s.arr
	if len(l.Runs) == durationBuckets {
		copy(s.runs.w[:], l.Runs)
		s.runs.n = l.RunsN
	}
	a.trust = min(max(l.Trust, -refillWindup), 1+refillWindup)
	if l.BootEstimate > 0 {
		s.bootEst, s.bootSeen = l.BootEstimate, true
	}
	if l.ResumeEstimate > 0 {
		s.resumeEst, s.resSeen = l.ResumeEstimate, true
	}
	for _, e := range l.Envelope {
		a.env.add(time.Unix(e.Minute*60, 0), e.Tier, e.Hot)
	}
	for _, f := range l.Floors {
		a.floors.add(time.Unix(f.Slot*int64(profileSlot/time.Second), 0), f.N)
	}
	if cs := l.Slot; cs != nil && cs.Start.Equal(s.now.Truncate(profileSlot)) && len(cs.LastCounts) == unlikeSlots &&
		len(cs.LastExpected) == unlikeSlots && len(cs.TierNeeds) == cs.Count && len(cs.HotNeeds) == cs.Count &&
		len(cs.DrainNeeds) == cs.Count {
		a.slotStart, a.slotCount = cs.Start, cs.Count
		a.tierNeeds, a.hotNeeds, a.drainNeeds = slices.Clone(cs.TierNeeds), slices.Clone(cs.HotNeeds), slices.Clone(cs.DrainNeeds)
		a.prev = need{Tier: cs.Prev[0], Hot: cs.Prev[1], Drain: cs.Prev[2]}
		copy(a.lastCounts[:], cs.LastCounts) // a.folds is 0: index 0 is the oldest
		copy(a.lastExpected[:], cs.LastExpected)
	}
	if l.raw == nil {
		l.raw, _ = json.Marshal((*learnedJSON)(l)) // encoded once, as a snapshot is
	}
	s.learned = l
	s.learnedAt = s.now
	s.learnedGen = s.learnGen()
}
