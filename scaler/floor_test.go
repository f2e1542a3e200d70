package scaler

import (
	"testing"
	"time"
)

// The floor from the target: one instance at 20 jobs a day, none with no
// arrivals, more as the net rate within the horizon grows, and always
// P(N ≥ k) within coverShare.
func TestPoissonFloor(t *testing.T) {
	h := 45 * time.Second
	day := 20.0 / 86400
	if k := poissonFloor(day, day, h); k != 1 {
		t.Fatalf("20 jobs a day: floor %d, want 1", k)
	}
	if k := poissonFloor(0, 0, h); k != 0 {
		t.Fatalf("no arrivals: floor %d, want 0", k)
	}
	if k := poissonFloor(day, day, 0); k != 0 {
		t.Fatalf("empty horizon: floor %d, want 0", k)
	}
	// One job every 10 s, nothing coming back: 4.5 expected within 45 s;
	// P(N ≥ 9) = 0.040, P(N ≥ 8) = 0.087.
	if k := poissonFloor(0.1, 0.1, h); k != 9 {
		t.Fatalf("0.1/s: floor %d, want 9", k)
	}
	// As many jobs end as arrive: the returns refill the pool.
	if k := poissonFloor(0.1, 0, h); k != 1 {
		t.Fatalf("0.1/s balanced by returns: floor %d, want 1", k)
	}
}

// The floor counts lone arrivals of the last floorWindow only: a burst is
// for the profile and the envelope.
func TestFloorRateCountsLoneArrivals(t *testing.T) {
	a := newArrivals(nil)
	a.setHorizons(45*time.Second, 0)
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	a.record(t0, 1)
	a.record(t0.Add(time.Hour), 1)
	if lam, _ := a.floorRate(t0.Add(time.Hour)); lam != 2/floorWindow.Seconds() {
		t.Fatalf("two lone jobs: rate %g, want %g", lam, 2/floorWindow.Seconds())
	}
	a.record(t0.Add(2*time.Hour), 50) // a burst: only its first job is lone
	if lam, _ := a.floorRate(t0.Add(2 * time.Hour)); lam != 3/floorWindow.Seconds() {
		t.Fatalf("after a burst: rate %g, want %g", lam, 3/floorWindow.Seconds())
	}
	if lam, _ := a.floorRate(t0.Add(3*time.Hour + floorWindow)); lam != 0 {
		t.Fatalf("a window after the last: rate %g, want 0", lam)
	}
}
