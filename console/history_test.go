package console

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/scaler"
)

var t0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC) // a Monday, 00:00 UTC

func counts(ready, booting, suspended, acquired, idle int) scaler.Counts {
	return scaler.Counts{InstancesByPhase: map[string]int{"ready": ready, "booting": booting, "suspended": suspended},
		Slots: map[string]int{scaler.SlotAcquired: acquired, scaler.SlotIdle: idle}}
}

func TestFleetSeriesAveragesAndPeaksPerBucket(t *testing.T) {
	h := NewHistory()
	// Minute 0: 2 then 4 hot; minute 1: nothing; minute 2: 6 hot, 1 booting.
	h.Sample(t0, counts(2, 0, 0, 1, 1))
	h.Sample(t0.Add(30*time.Second), counts(4, 0, 0, 4, 0))
	h.Sample(t0.Add(2*time.Minute), counts(6, 1, 0, 3, 3))
	s := h.Fleet(t0, t0.Add(3*time.Minute))
	if s.Step != 60 || len(s.T) != 3 {
		t.Fatalf("3 minutes: step %d, %d buckets; want 60 s, 3", s.Step, len(s.T))
	}
	if got := *s.Avg["hot"][0]; got != 3 {
		t.Errorf("hot average of minute 0 = %v; want 3", got)
	}
	if got := *s.Max["hot"][0]; got != 4 {
		t.Errorf("hot peak of minute 0 = %v; want 4", got)
	}
	if s.Avg["hot"][1] != nil {
		t.Errorf("a minute without samples = %v; want null (a gap)", *s.Avg["hot"][1])
	}
	if got := *s.Util[0]; got != 0.83 { // 5 acquired of 6 usable slot-samples
		t.Errorf("utilization of minute 0 = %v; want 0.83", got)
	}
	if got := *s.Avg["booting"][2]; got != 1 {
		t.Errorf("booting in minute 2 = %v; want 1", got)
	}
}

func TestAWeekIsAggregatedToAFewHundredPoints(t *testing.T) {
	h := NewHistory()
	end := t0.Add(7 * 24 * time.Hour)
	for at := t0; at.Before(end); at = at.Add(time.Minute) {
		h.Sample(at, counts(at.Hour(), 0, 0, 0, 0))
	}
	s := h.Fleet(t0, end)
	if len(s.T) > maxPoints || len(s.T) < maxPoints/2 {
		t.Fatalf("a week in %d points; want at most %d and not much fewer", len(s.T), maxPoints)
	}
	// A bucket that lies within one hour averages that hour's value, and
	// its peak is that too.
	checked := 0
	for i, ts := range s.T {
		at := time.Unix(ts, 0).UTC()
		if at.Minute()*60+int(s.Step) <= 3600 && s.Avg["hot"][i] != nil {
			checked++
			if *s.Avg["hot"][i] != float64(at.Hour()) || *s.Max["hot"][i] != float64(at.Hour()) {
				t.Errorf("bucket at %s: avg %v max %v; want %d", at, *s.Avg["hot"][i], *s.Max["hot"][i], at.Hour())
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d buckets lie within an hour", checked)
	}
	// The ring forgets what is older than a week: the week before is empty.
	old := h.Fleet(t0.Add(-24*time.Hour), t0)
	for _, v := range old.Avg["hot"] {
		if v != nil {
			t.Fatalf("data before the first sample: %v", *v)
		}
	}
}

func TestWaitPercentilesPerHour(t *testing.T) {
	h := NewHistory()
	// 100 jobs in hour 0 waiting 1..100 s; none in hour 1; one in hour 2.
	for i := 1; i <= 100; i++ {
		h.JobStarted(t0.Add(time.Duration(i)*time.Second), JobRef{Source: "queue", ID: fmt.Sprint(i)}, "a", time.Duration(i)*time.Second)
	}
	h.JobStarted(t0.Add(2*time.Hour), JobRef{Source: "queue", ID: "x"}, "a", 3*time.Second)
	w := h.Waits(t0, t0.Add(3*time.Hour))
	if len(w.T) != 3 || w.Jobs[0] != 100 || w.Jobs[1] != 0 || w.Jobs[2] != 1 {
		t.Fatalf("hours %v jobs %v; want 3 hours with 100, 0, 1 jobs", w.T, w.Jobs)
	}
	within := func(name string, got *float64, want float64) {
		t.Helper()
		if got == nil || *got < want || *got > want*waitRatio {
			t.Errorf("%s = %v; want within [%v, %v]", name, got, want, want*waitRatio)
		}
	}
	within("p50", w.P50[0], 50)
	within("p95", w.P95[0], 95)
	within("p99", w.P99[0], 99)
	if *w.P99[0] > 100 {
		t.Errorf("p99 %v is above the largest wait, 100 s", *w.P99[0])
	}
	if w.P50[1] != nil {
		t.Errorf("an hour without jobs has p50 %v; want null", *w.P50[1])
	}
	if *w.P50[2] != 3 {
		t.Errorf("one job of 3 s: p50 %v; want 3", *w.P50[2])
	}
}

func TestCostIsInstanceHoursPerDay(t *testing.T) {
	h := NewHistory()
	// Day 0: 2 hot for 12 hours, 1 suspended for 24 hours; day 1: 1 booting for an hour.
	for m := 0; m < 24*60; m++ {
		hot := 0
		if m < 12*60 {
			hot = 2
		}
		h.Sample(t0.Add(time.Duration(m)*time.Minute), counts(hot, 0, 1, 0, 0))
	}
	for m := 0; m < 60; m++ {
		h.Sample(t0.Add(24*time.Hour+time.Duration(m)*time.Minute), counts(0, 1, 0, 0, 0))
	}
	// Day 3 has a sample; day 2 has none.
	h.Sample(t0.Add(3*24*time.Hour), counts(0, 0, 0, 0, 0))
	c := h.Cost(t0.Add(-24*time.Hour), t0.Add(3*24*time.Hour+time.Minute))
	got := fmt.Sprintf("%v %v %v %v", c.T, floats(c.Hot), floats(c.Booting), floats(c.Suspended))
	d := t0.Unix()
	want := fmt.Sprintf("[%d %d %d %d] [24 0 null 0] [0 1 null 0] [24 0 null 0]", d, d+86400, d+2*86400, d+3*86400)
	if got != want {
		t.Fatalf("cost (days, hot, booting, suspended hours) %s; want %s: from the first day with data, null for a day without", got, want)
	}
}

func floats(p []*float64) []string {
	out := []string{}
	for _, v := range p {
		if v == nil {
			out = append(out, "null")
		} else {
			out = append(out, fmt.Sprint(*v))
		}
	}
	return out
}

func TestDecisionsCarryTheForecastAndStayBounded(t *testing.T) {
	h := NewHistory()
	h.Observe(t0, scaler.Sized{Hot: 3, Rate: 0.5, Burst: 2.5, Source: "last hour", BootTime: time.Minute})
	for i := range maxDecided + 10 {
		h.Observe(t0.Add(time.Duration(i)*time.Second), scaler.Scaled{Direction: "up", N: i})
	}
	d := h.decided.newest(0, nil)
	if len(d) != maxDecided || d[0].N != maxDecided+9 || d[len(d)-1].N != 10 {
		t.Fatalf("%d decisions, newest N=%d, oldest N=%d; want %d, newest first", len(d), d[0].N, d[len(d)-1].N, maxDecided)
	}
	if d[0].Forecast == nil || d[0].Forecast.Rate != 0.5 || d[0].Forecast.BootTime != 60 {
		t.Errorf("decision forecast %+v; want the last sizing", d[0].Forecast)
	}
}

func TestDeletedInstancesKeepTheirJobs(t *testing.T) {
	h := NewHistory()
	h.JobStarted(t0, JobRef{Source: "queue", ID: "1", Owner: "alice"}, "i-1", time.Second)
	h.JobStarted(t0, JobRef{Source: "gitlab", ID: "77"}, "i-1", -1)
	h.Observe(t0.Add(time.Hour), scaler.Gone{ID: "i-1", Reason: scaler.Reason("max_use_count"), Lifetime: time.Hour})
	del := h.deleted.newest(0, nil)
	if len(del) != 1 || del[0].Reason != "max_use_count" || len(del[0].Jobs) != 2 || del[0].Lifetime != 3600 {
		t.Fatalf("deleted %+v", del)
	}
	if _, ok := h.instJobs["i-1"]; ok {
		t.Error("a gone instance's jobs are still kept among the live ones")
	}
	h.JobFinished(JobRef{Source: "gitlab", ID: "77"}, t0.Add(time.Minute), "failed", "script failed")
	others := h.others.newest(0, nil)
	if len(others) != 1 || others[0].State != "failed" || others[0].Reason != "script failed" {
		t.Errorf("GitLab job after it finished: %+v", others)
	}
	// Waits of sources that cannot say (negative) are not counted.
	if w := h.Waits(t0, t0.Add(time.Hour)); w.Jobs[0] != 1 {
		t.Errorf("waits counted %d jobs; want 1 (the GitLab job has no wait)", w.Jobs[0])
	}
}

func TestBackfillCountsTheLastWeeksWaits(t *testing.T) {
	h := NewHistory()
	now := t0.Add(8 * 24 * time.Hour)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	h.Backfill(now, []api.Job{
		{ID: "1", CreatedAt: now.Add(-time.Hour - 30*time.Second), StartedAt: at(-time.Hour)},
		{ID: "2", CreatedAt: now.Add(-8 * 24 * time.Hour), StartedAt: at(-8*24*time.Hour + time.Second)}, // older than a week
		{ID: "3", CreatedAt: now.Add(-time.Minute)},                                                      // still queued
	})
	w := h.Waits(now.Add(-2*time.Hour), now)
	total, p50 := 0, 0.0
	for i, n := range w.Jobs {
		total += n
		if n > 0 {
			p50 = *w.P50[i]
		}
	}
	if total != 1 || p50 != 30 {
		t.Errorf("backfilled %d waits (%v); want the one of 30 s from the last week", total, w.P50)
	}
}

// A scale-in decision names the instances it deleted and why; a delete of
// another cause after it (a failed heartbeat) is not put on it.
func TestScaleInDecisionNamesItsInstancesAndReason(t *testing.T) {
	h := NewHistory()
	h.Observe(t0, scaler.Decrease{ID: "i-0", Reason: scaler.ReasonHeartbeat})
	h.Observe(t0, scaler.Scaled{Direction: "in", N: 2})
	h.Observe(t0, scaler.Decrease{ID: "i-1", Reason: scaler.ReasonIdle})
	h.Observe(t0, scaler.Decrease{ID: "i-2", Reason: scaler.ReasonIdle})
	h.Observe(t0, scaler.Decrease{ID: "i-3", Reason: scaler.ReasonHeartbeat})
	d := h.decided.newest(0, nil)
	if len(d) != 1 || strings.Join(d[0].Instances, ",") != "i-1,i-2" || d[0].Reason != "idle_timeout" {
		t.Fatalf("decision %+v; want i-1,i-2 for idle_timeout", d)
	}
}

// A fresh install's 24 h chart spans its data, minute by minute, not 24 h
// of empty buckets with the data a sliver at the right edge.
func TestFleetSeriesStartsAtTheFirstSample(t *testing.T) {
	h := NewHistory()
	now := t0.Add(24 * time.Hour)
	for i := range 10 {
		h.Sample(now.Add(time.Duration(i-10)*time.Minute), scaler.Counts{InstancesByPhase: map[string]int{"ready": 1}})
	}
	s := h.Fleet(now.Add(-24*time.Hour), now)
	if s.Step != 60 || len(s.T) != 10 || s.T[0] != now.Add(-10*time.Minute).Unix() || s.Avg["hot"][0] == nil {
		t.Fatalf("24 h of a 10-minute-old fleet: step %d, %d points from %d; want 10 one-minute points from the first sample", s.Step, len(s.T), s.T[0])
	}
}
