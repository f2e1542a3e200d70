package scaler

import (
	"testing"
	"time"
)

// TestBuildGaps checks what the gap model learns: a build is arrivals with
// no buildQuiet between them, gaps longer than maxBuildGap are lulls, and
// the expected wait is the mean residual of the gaps longer than the time
// elapsed.
func TestBuildGaps(t *testing.T) {
	var g buildGaps
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	// Builds of 10 jobs (one a second) alternately 4 and 8 minutes apart.
	at := t0
	for i := range 10 {
		for j := range 10 {
			g.add(at.Add(time.Duration(j)*time.Second), 1)
		}
		if i%2 == 0 {
			at = at.Add(4 * time.Minute)
		} else {
			at = at.Add(8 * time.Minute)
		}
	}
	last := g.start
	if g.n != 9 {
		t.Fatalf("gaps learned = %d, want 9", g.n)
	}
	wait, size, ok := g.nextBuild(last.Add(time.Minute))
	// Residuals 3 and 7 minutes: five gaps of 4 minutes, four of 8.
	want := (5*3*time.Minute + 4*7*time.Minute) / 9
	if !ok || wait != want || size != 10 {
		t.Fatalf("nextBuild = %s, %d, %v; want %s, 10, true", wait, size, ok, want)
	}
	// After 5 minutes only the 8-minute gaps are left: 3 minutes to go.
	if wait, _, ok := g.nextBuild(last.Add(5 * time.Minute)); !ok || wait != 3*time.Minute {
		t.Fatalf("nextBuild after 5m = %s, %v; want 3m, true", wait, ok)
	}
	// Past every gap seen: a lull, nothing is expected.
	if _, _, ok := g.nextBuild(last.Add(9 * time.Minute)); ok {
		t.Fatal("nextBuild past every gap: want not ok")
	}
	// A lull longer than maxBuildGap is not learned as a gap.
	g.add(last.Add(2*time.Hour), 1)
	if g.n != 9 {
		t.Fatalf("gaps learned after a lull = %d, want 9", g.n)
	}
}

// TestGapKeep checks the ski-rental rule: the surplus is kept (up to the
// tier's target plus the mean build) only while the next build is expected
// within the break-even time.
func TestGapKeep(t *testing.T) {
	a := newArrivals(nil)
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	for i := range 10 {
		a.record(t0.Add(time.Duration(i)*6*time.Minute), 20)
	}
	last := t0.Add(54 * time.Minute)
	if k := a.gapKeep(last.Add(time.Minute), 10*time.Minute, 40, 1); k != 60 {
		t.Fatalf("gapKeep 1m after a build = %d, want 60", k)
	}
	// A break-even time of 4 minutes: the next build (5 minutes away) is
	// further than it, nothing is kept.
	if k := a.gapKeep(last.Add(time.Minute), 4*time.Minute, 40, 1); k != 0 {
		t.Fatalf("gapKeep with a 4m break-even = %d, want 0", k)
	}
}
