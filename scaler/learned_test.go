package scaler

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/berth-ci/berth/policy"
)

func learnedConfig() Config {
	return Config{MaxInstances: 100, CapacityPerInstance: 1, CanSuspend: true, SuspendedCost: 0.1,
		BootTimeEstimate: time.Minute, ResumeTimeEstimate: 10 * time.Second,
		Policies: FixedPolicy(policy.Policy{TargetWait: 15 * time.Second})}
}

// restartCore saves s's State through JSON, as a store does, and restores
// it at now.
func restartCore(t *testing.T, s *Scaler, now time.Time) *Scaler {
	t.Helper()
	b, err := json.Marshal(s.State())
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	r, _, err := Restore(learnedConfig(), st, now)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// lastHour is the last hour's slot counts, oldest first.
func lastHour(a *arrivals) []int {
	var v []int
	for k := range unlikeSlots {
		v = append(v, a.lastCounts[(a.folds+k)%unlikeSlots])
	}
	return v
}

// teach gives the core a morning of builds: 20 jobs every 6 minutes from
// 9:00, each running 4 minutes, a surprise in the envelope, waits that
// steered the refill trust and a boot time seen.
func teach(s *Scaler, t0 time.Time) time.Time {
	at := t0
	for i := range 10 {
		at = t0.Add(time.Duration(i) * 6 * time.Minute)
		s.Advance(at)
		s.arr.record(at, 20)
		for range 20 {
			s.arr.release(at.Add(4 * time.Minute))
			s.runs.add(4 * time.Minute)
		}
	}
	s.arr.env.add(at, 30, 3)
	for range 50 {
		s.arr.steer(true)
	}
	s.learnBoot(75 * time.Second)
	return at
}

// TestRestartKeepsLearnedStateInCore: what the core learned beyond the
// profile (run times, the refill's trust, the boot time seen, the envelope,
// the last hours' arrivals, and the slot being counted)
// comes back after a stop and a restore within the same slot; on
// main only the profile did, and a restarted core had no run times (its
// learned returns off for minDurations releases), trust 0.5 and no
// envelope.
func TestRestartKeepsLearnedStateInCore(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	s := New(learnedConfig(), t0)
	last := teach(s, t0)
	s.Advance(last.Add(30 * time.Second))
	s.StopScaleUp() // at stop the learned state is snapshotted
	if _, dirty := s.Ready(); !dirty {
		t.Fatal("StopScaleUp after learning did not mark the state dirty: nothing would be saved")
	}
	r := restartCore(t, s, last.Add(time.Minute))
	if r.runs.n != s.runs.n || r.runs.w != s.runs.w {
		t.Errorf("run times: %d releases %v, want %d %v", r.runs.n, r.runs.w, s.runs.n, s.runs.w)
	}
	if r.arr.trust != s.arr.trust || r.arr.trust == 0.5 {
		t.Errorf("trust %g, want %g", r.arr.trust, s.arr.trust)
	}
	if r.bootEst != 75*time.Second || !r.bootSeen {
		t.Errorf("boot estimate %s (seen %v), want 1m15s", r.bootEst, r.bootSeen)
	}
	if tier, hot := r.arr.env.need(last.Add(time.Minute)); tier != 30 || hot != 3 {
		t.Errorf("envelope need %g/%g, want 30/3", tier, hot)
	}
	if got, want := r.arr.floors.count(last), s.arr.floors.count(last); got != want {
		t.Errorf("floor counts %d, want %d", got, want)
	}
	if r.arr.slotCount != s.arr.slotCount || !r.arr.slotStart.Equal(s.arr.slotStart) ||
		!slices.Equal(r.arr.tierNeeds, s.arr.tierNeeds) || !slices.Equal(lastHour(r.arr), lastHour(s.arr)) {
		t.Errorf("slot being counted: %d at %s, last %v; want %d at %s, last %v", r.arr.slotCount, r.arr.slotStart,
			lastHour(r.arr), s.arr.slotCount, s.arr.slotStart, lastHour(s.arr))
	}
	// A second restart with nothing learned between keeps it all again.
	r2 := restartCore(t, r, last.Add(2*time.Minute))
	if r2.runs.n != s.runs.n || r2.arr.trust != s.arr.trust {
		t.Errorf("second restart: %d releases, trust %g", r2.runs.n, r2.arr.trust)
	}

	// Restored in a later slot, the slot being counted and the last hour
	// are not taken (their slots were never counted), the rest is.
	late := restartCore(t, s, last.Add(40*time.Minute))
	if late.arr.slotCount != 0 || !late.arr.slotStart.IsZero() || late.arr.lastExpected[0] != -1 {
		t.Errorf("restored in a later slot: slot %d at %s, last hour %v", late.arr.slotCount, late.arr.slotStart, late.arr.lastExpected)
	}
	if late.runs.n != s.runs.n {
		t.Errorf("restored in a later slot: %d releases, want %d", late.runs.n, s.runs.n)
	}
}

// TestLearnedSnapshotOncePerMinute: Tick snapshots the learned state once
// learnedEvery passed and something was learned, not on every event.
func TestLearnedSnapshotOncePerMinute(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	s := New(learnedConfig(), t0)
	s.Tick()
	s.Ready()
	if s.learned != nil {
		t.Fatal("a snapshot with nothing learned")
	}
	s.arr.record(t0, 5)
	s.Advance(t0.Add(time.Minute))
	s.Tick()
	first := s.learned
	if first == nil {
		t.Fatal("no snapshot a minute after learning")
	}
	s.arr.record(t0.Add(time.Minute), 5)
	s.Advance(t0.Add(90 * time.Second))
	s.Tick()
	if s.learned != first {
		t.Fatal("a second snapshot within a minute")
	}
	s.Advance(t0.Add(2 * time.Minute))
	s.Tick()
	if s.learned == first || s.State().Learned != s.learned {
		t.Fatal("no new snapshot after a minute with new arrivals, or State does not carry it")
	}
}
