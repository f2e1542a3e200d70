package bench

import (
	"testing"
	"time"

	"github.com/berth-ci/berth/policy"
)

// warm-pool serves bursts from its stopped instances: resumes, waits of a
// resume, and never more than max_instances, unlike naive-idle.
func TestWarmPoolServesBurstsByResumes(t *testing.T) {
	jobs, start := burstyDay()
	c := cfgFor(PolicyWarmPool, 100, 0)
	c.ResumeTime = 10 * time.Second
	c.IdleTime = 0
	c.PoolSize = 30
	res := run(t, jobs, start, c)
	if res.Resumes == 0 || res.SuspendedInstanceSeconds == 0 {
		t.Fatalf("%d resumes, %.0f suspended seconds: the pool was not used", res.Resumes, res.SuspendedInstanceSeconds)
	}
	if res.WaitP95S > 30 || res.PeakInstances > c.MaxInstances || res.FailedCapacity != 0 {
		t.Fatalf("p95 %.0fs, peak %d (max %d), failed_capacity %d", res.WaitP95S, res.PeakInstances, c.MaxInstances, res.FailedCapacity)
	}
	if res.PoolSize != 30 {
		t.Fatalf("result pool size %d", res.PoolSize)
	}
}

// scheduled keeps its pool only in its window: the same pool for 6 hours of
// the day costs fewer suspended seconds than all day, and a burst outside
// the window waits a boot.
func TestScheduledPoolFollowsItsWindow(t *testing.T) {
	jobs, start := burstyDay()
	c := cfgFor(PolicyScheduled, 100, 0)
	c.ResumeTime = 10 * time.Second
	c.IdleTime = 0
	c.Schedule = []policy.Period{
		{Periods: []string{"* * * * *"}, Policy: policy.Policy{SuspendedIdleCount: 0}},
		{Periods: []string{"* 6-11 * * *"}, Policy: policy.Policy{SuspendedIdleCount: 30}},
	}
	sched := run(t, jobs, start, c)
	c.Policy, c.PoolSize, c.Schedule = PolicyWarmPool, 30, nil
	fixed := run(t, jobs, start, c)
	if sched.SuspendedInstanceSeconds == 0 || sched.SuspendedInstanceSeconds >= fixed.SuspendedInstanceSeconds/2 {
		t.Fatalf("scheduled %.0f suspended seconds, fixed %.0f: want some, and well under half", sched.SuspendedInstanceSeconds, fixed.SuspendedInstanceSeconds)
	}
	if sched.WaitP95S < 60 {
		t.Fatalf("scheduled p95 %.0fs: bursts outside 6-12 h should wait a boot", sched.WaitP95S)
	}
	c.Policy = PolicyScheduled
	if _, err := Run(jobs, start, c); err == nil {
		t.Fatal("scheduled without a schedule is accepted")
	}
	c.Schedule = []policy.Period{{Periods: []string{"not cron"}}}
	if _, err := Run(jobs, start, c); err == nil {
		t.Fatal("a bad cron expression is accepted")
	}
}

// A suspend that takes time is billed at the full price: the same replay
// with a 30 s suspend has fewer suspended seconds and costs more.
func TestSuspendTimeIsBilledInFull(t *testing.T) {
	jobs, start := burstyDay()
	jobs, _ = Window(jobs, 0, 6)
	fast := tierConfig()
	slow := tierConfig()
	slow.SuspendTime = 30 * time.Second
	a, b := run(t, jobs, start, fast), run(t, jobs, start, slow)
	if b.SuspendTimeS != 30 || b.FailedCapacity != 0 || b.FailedProvider != 0 {
		t.Fatalf("suspend 30s: result %.0fs, failed %d/%d", b.SuspendTimeS, b.FailedCapacity, b.FailedProvider)
	}
	running := func(r Result) float64 { return r.InstanceSeconds - r.SuspendedInstanceSeconds }
	if running(b) <= running(a) || b.Utilization >= a.Utilization {
		t.Fatalf("running seconds %.0f → %.0f, utilization %.3f → %.3f: a slow suspend costs nothing", running(a), running(b), a.Utilization, b.Utilization)
	}
}

// Jobs of the warmup are replayed but not measured.
func TestWarmupLeavesJobsOutOfTheWaits(t *testing.T) {
	jobs, start := burstyDay()
	c := tierConfig()
	c.Warmup = 12 * time.Hour
	res := run(t, jobs, start, c)
	if res.Jobs != len(jobs) || res.Completed != len(jobs) || res.Measured != len(jobs)/2 {
		t.Fatalf("jobs %d, completed %d, measured %d; want %d, %d, %d", res.Jobs, res.Completed, res.Measured, len(jobs), len(jobs), len(jobs)/2)
	}
	c.Warmup = -time.Second
	if _, err := Run(jobs, start, c); err == nil {
		t.Fatal("a negative warmup is accepted")
	}
}
