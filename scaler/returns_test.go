package scaler

import (
	"testing"
	"time"
)

// Learned run times: with every job run 4 minutes, a job busy for 3 minutes
// surely ends within 2 minutes, and certain returns count in full. One busy
// for a minute may or may not (the histogram is linear within its bucket,
// 128-256 s): it adds its chance less its share of the 95 % margin, so the
// count stays below the mean. Before minDurations releases nothing counts.
func TestExpectedReturns(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	s := &Scaler{now: t0, res: map[string]*reservation{}}
	s.res["old1"] = &reservation{acquired: true, startedAt: t0.Add(-3 * time.Minute)}
	s.res["old2"] = &reservation{acquired: true, startedAt: t0.Add(-3 * time.Minute)}
	s.res["restored"] = &reservation{acquired: true} // start unknown: not counted
	for range minDurations - 1 {
		s.runs.add(4 * time.Minute)
	}
	if got := s.expectedReturns(2 * time.Minute); got != 0 {
		t.Fatalf("with %d run times learned: %v returns, want 0", s.runs.n, got)
	}
	s.runs.add(4 * time.Minute)
	if got := s.expectedReturns(2 * time.Minute); got != 2 {
		t.Fatalf("returns within 2m: %v, want the 2 jobs busy for 3m", got)
	}
	s.res["new"] = &reservation{acquired: true, startedAt: t0.Add(-time.Minute)}
	if got := s.expectedReturns(2 * time.Minute); got <= 1 || got >= 2.41 {
		t.Fatalf("returns within 2m: %v, want between 1 and the mean 2.41", got)
	}
	if got := s.expectedReturns(10 * time.Minute); got != 3 {
		t.Fatalf("returns within 10m: %v, want all 3 jobs with a known start", got)
	}
}

// Run times spread over the histogram's buckets: the share longer than t
// falls with t, from all at 0 to none past the longest.
func TestDurationsSurvival(t *testing.T) {
	var h durations
	for _, d := range []time.Duration{30 * time.Second, 2 * time.Minute, 8 * time.Minute, 30 * time.Minute} {
		h.add(d)
	}
	prev := 1.0
	for _, d := range []time.Duration{0, time.Minute, 5 * time.Minute, 20 * time.Minute, time.Hour} {
		sv := h.survival(d)
		if sv > prev {
			t.Fatalf("survival(%v) = %v rises above %v", d, sv, prev)
		}
		prev = sv
	}
	if sv := h.survival(0); sv != 1 {
		t.Fatalf("survival(0) = %v, want 1", sv)
	}
	if sv := h.survival(time.Hour); sv != 0 {
		t.Fatalf("survival(1h) = %v, want 0", sv)
	}
}
