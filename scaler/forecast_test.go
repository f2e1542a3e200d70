package scaler

import (
	"encoding/json"
	"testing"
	"time"
)

// A Monday, so that weekday slots read naturally.
var monday = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// The upper quantile is job-weighted: one burst of 100 among single arrivals
// is covered at 95, not at 100, and single arrivals need a pool of one.
func TestUpperQuantileIsJobWeighted(t *testing.T) {
	v := make([]int32, 0, 100)
	for i := range 100 {
		v = append(v, int32(i+1))
	}
	if got := upperQuantile(v); got != 95 {
		t.Fatalf("upper quantile of 1..100 = %.0f, want 95", got)
	}
	if got := upperQuantile([]int32{1, 1, 1}); got != 1 {
		t.Fatalf("upper quantile of single arrivals = %.0f, want 1", got)
	}
	if got := upperQuantile(nil); got != 0 {
		t.Fatalf("upper quantile of nothing = %.0f, want 0", got)
	}
}

// The model is part of the durable state and survives a restart.
func TestArrivalModelSurvivesRestart(t *testing.T) {
	s := New(Config{}, monday)
	s.arr.setHorizons(time.Minute, 0)
	s.arr.drain.setHorizon(10 * time.Minute)
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
	f := r.arr.forecast(monday.Add(34*time.Hour-2*time.Minute), 2*time.Minute)
	if f.Burst != 114 || f.Drain != 114 {
		t.Fatalf("after restart the forecast for Tue 10:00 is %+v, want burst and drain 114", f)
	}
}

// A model saved before the drawdown was learned (no drain slices) keeps
// the rest and learns the drawdown afresh.
func TestArrivalModelWithoutDrainLoads(t *testing.T) {
	a := newArrivals(nil)
	a.setHorizons(time.Minute, 0)
	a.record(monday.Add(10*time.Hour), 120)
	a.roll(monday.Add(11 * time.Hour))
	m := *a.snapshot()
	m.WeekDrain, m.DayDrain, m.raw = nil, nil, nil
	b := newArrivals(nil)
	b.load(&m)
	if !b.learned() {
		t.Fatal("a model without drain slices was refused")
	}
	f := b.forecast(monday.Add(34*time.Hour-2*time.Minute), 2*time.Minute)
	if f.Burst != 114 || f.Drain != 0 {
		t.Fatalf("forecast for Tue 10:00 from a model without drain is %+v, want burst 114, drain 0", f)
	}
}

// A model of the wrong shape (an older berth's) is relearned, not refused.
func TestArrivalModelOfAnotherShapeIsIgnored(t *testing.T) {
	a := newArrivals(nil)
	a.load(&ArrivalModel{DayRate: []float64{0.5}, DayBurst: []float64{40}, DaySeen: []int{3}})
	if a.learned() {
		t.Fatal("a model of the wrong shape was loaded")
	}
}
