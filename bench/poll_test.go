package bench

import (
	"testing"
	"time"
)

// idleDay is a near-empty trace: one job, then GitLab sits idle for a day,
// then one more job.
func idleDay() ([]Job, time.Time) {
	start := time.Unix(1_700_000_000, 0)
	return []Job{{Arrival: start, Duration: time.Minute}, {Arrival: start.Add(24 * time.Hour), Duration: time.Minute}}, start
}

// An idle GitLab costs nothing (issue 17): with four long-polls in flight, a
// day without jobs costs berth no instance on demand and idle_count
// instances in preemptive mode; booking polls as jobs cost one instance per
// poll, around the clock.
func TestIdleGitLabDay(t *testing.T) {
	jobs, start := idleDay()
	day := 24 * time.Hour.Seconds()
	for _, tc := range []struct {
		name          string
		preemptive    bool
		idle          int
		asDemand      bool
		minS, maxS    float64
		wantCompleted int
	}{
		{"on-demand, polls as demand (before)", false, 0, true, 4 * day, 6 * day, 2},
		{"on-demand, poll bookings", false, 0, false, 0, 3600, 2},
		{"preemptive idle_count 1, polls as demand (before)", true, 1, true, 4.5 * day, 6 * day, 2},
		{"preemptive idle_count 1, poll bookings", true, 1, false, day, day + 3600, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.PollConcurrency, cfg.PollsAsDemand = 4, tc.asDemand
			cfg.Preemptive, cfg.IdleCount, cfg.IdleTime = tc.preemptive, tc.idle, 10*time.Minute
			res := run(t, jobs, start, cfg)
			if res.Completed != tc.wantCompleted || res.FailedCapacity != 0 {
				t.Fatalf("completed %d of %d, capacity failures %d", res.Completed, res.Jobs, res.FailedCapacity)
			}
			if res.InstanceSeconds < tc.minS || res.InstanceSeconds > tc.maxS {
				t.Fatalf("%.1f instance-hours for an idle day, want %.1f..%.1f",
					res.InstanceSeconds/3600, tc.minS/3600, tc.maxS/3600)
			}
			t.Logf("%.1f instance-hours, peak %d instances", res.InstanceSeconds/3600, res.PeakInstances)
		})
	}
}

// A polling source takes every job of a busy trace, none fails, and the
// fleet stays within max_instances: the polls' bookings are the guarantee.
func TestPollingSourceRunsEveryJob(t *testing.T) {
	onWorkloads(t, func(t *testing.T, w workload) {
		cfg := cfgFor(PolicyBerth, w.roomy, 5)
		cfg.PollConcurrency = 4
		res := run(t, w.jobs, w.start, cfg)
		if res.FailedCapacity != 0 || res.Completed != res.Jobs {
			t.Fatalf("failures: %+v", res)
		}
		if res.MaxInstancesExceeded != 0 {
			t.Fatalf("max_instances exceeded %d times", res.MaxInstancesExceeded)
		}
	})
}

func TestPollConfigErrors(t *testing.T) {
	jobs, start := idleDay()
	for _, cfg := range []Config{
		{PollConcurrency: -1},
		{PollConcurrency: 2, Policy: PolicyNaiveIdle},
		{PollConcurrency: 2, Preemptive: true},
		{PollsAsDemand: true},
	} {
		if _, err := Run(jobs, start, cfg); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}
