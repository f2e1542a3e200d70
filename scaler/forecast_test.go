package scaler

import (
	"encoding/json"
	"testing"
	"time"
)

// A Monday, so that weekday slots read naturally.
var monday = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// The cover of a slot is the pool that leaves at most 5 % of its arrivals
// to a boot: one burst of 100 among single arrivals is covered at 95, not
// at 100, and single arrivals need a pool of one.
func TestCoverIsTheJobWeightedQuantile(t *testing.T) {
	a := newArrivals()
	at := monday.Add(10 * time.Hour)
	a.record(at, 100)
	if got := a.cover(); got != 95 {
		t.Fatalf("cover of one burst of 100 = %d, want 95", got)
	}
	b := newArrivals()
	for i := range 200 {
		b.record(at.Add(time.Duration(i)*2*time.Second), 1)
	}
	if got := b.cover(); got != 1 {
		t.Fatalf("cover of single arrivals = %d, want 1", got)
	}
}

// A slot is learned when it ends; the daily profile answers for the same
// time the next day, the weekday profile a week later, and the forecast
// looks one slot ahead.
func TestForecastFromProfiles(t *testing.T) {
	a := newArrivals()
	burstAt := monday.Add(10 * time.Hour)
	a.record(burstAt, 120)
	a.roll(burstAt.Add(profileSlot))
	if !a.learned() {
		t.Fatal("a folded slot is not learned")
	}
	f := a.forecast(burstAt.Add(24*time.Hour-20*time.Minute), time.Minute) // Tue 09:40
	if f.Burst != 0 {
		t.Fatalf("Tue 09:40 forecasts burst %.0f, want 0: 10:00 is beyond one slot", f.Burst)
	}
	f = a.forecast(burstAt.Add(24*time.Hour-15*time.Minute), time.Minute) // Tue 09:45
	if f.Burst != 114 || f.Source != "daily profile at Tue 10:00" {
		t.Fatalf("Tue 09:45 forecast = %+v, want burst 114 from the daily profile at 10:00", f)
	}
	// A week later the weekday profile has Monday 10:00 itself.
	f = a.forecast(burstAt.Add(7*24*time.Hour), time.Minute)
	if f.Source != "weekday profile at Mon 10:00" {
		t.Fatalf("next Monday 10:00 forecast = %+v, want the weekday profile", f)
	}
}

// The model is part of the durable state and survives a restart.
func TestArrivalModelSurvivesRestart(t *testing.T) {
	s := New(Config{}, monday)
	s.arr.record(monday.Add(10*time.Hour), 120)
	s.Advance(monday.Add(11 * time.Hour))
	s.Tick()
	b, err := json.Marshal(s.State())
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Arrivals == nil {
		t.Fatal("the learned model is not in State")
	}
	r, _, err := Restore(Config{}, st, monday.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	f := r.arr.forecast(monday.Add(34*time.Hour-15*time.Minute), time.Minute)
	if f.Burst != 114 {
		t.Fatalf("after restart the forecast for Tue 10:00 is %+v, want burst 114", f)
	}
}
