package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// burstyDay is a synthetic day of CI bursts: every 10 minutes a build of 30
// jobs arrives within one second and runs 3 to 6 minutes. It needs no trace.
func burstyDay() ([]Job, time.Time) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC) // a Monday
	var jobs []Job
	for b := 0; b < 6*24; b++ {
		at := t0.Add(time.Duration(b) * 10 * time.Minute)
		for i := 0; i < 30; i++ {
			jobs = append(jobs, Job{Arrival: at, Duration: time.Duration(180+6*i) * time.Second})
		}
	}
	return jobs, t0
}

func tierConfig() Config {
	c := cfgFor(PolicyBerth, 100, 0)
	c.ResumeTime = 10 * time.Second
	c.IdleTime = 0
	c.SuspendedIdleTime = 30 * time.Minute
	c.TargetWait = 15 * time.Second
	return c
}

// With a suspended tier sized by target_wait, bursts are served by resumes
// (10 s) instead of boots (60 s): the p95 wait meets the target, at a
// utilization no reactive hot pool reaches on the same bursts.
func TestSuspendedTierMeetsTheWaitTarget(t *testing.T) {
	jobs, start := burstyDay()
	tier := run(t, jobs, start, tierConfig())
	if tier.WaitP95S > 15 || tier.FailedCapacity != 0 {
		t.Fatalf("tier: p95 %.0fs, failed_capacity %d; want ≤ 15s and 0", tier.WaitP95S, tier.FailedCapacity)
	}
	if tier.Resumes == 0 || tier.SuspendedInstanceSeconds == 0 {
		t.Fatalf("tier: %d resumes, %.0f suspended seconds; the tier was not used", tier.Resumes, tier.SuspendedInstanceSeconds)
	}
	if tier.SuspendedInstanceSeconds >= tier.InstanceSeconds {
		t.Fatalf("suspended seconds %.0f are not a part of billed seconds %.0f", tier.SuspendedInstanceSeconds, tier.InstanceSeconds)
	}
	// Naive-idle with a hot pool as large as a burst meets the wait too,
	// but pays for 30 running instances all day.
	naive := cfgFor(PolicyNaiveIdle, 100, 30)
	n := run(t, jobs, start, naive)
	if tier.Utilization <= n.Utilization {
		t.Fatalf("tier utilization %.2f is not above naive-idle's %.2f (p95 %.0fs)", tier.Utilization, n.Utilization, n.WaitP95S)
	}
	// Without the tier, and with an idle_time shorter than the pause
	// between builds, berth waits a boot for most of every burst.
	plain := cfgFor(PolicyBerth, 100, 0)
	plain.IdleTime = time.Minute
	p := run(t, jobs, start, plain)
	if p.WaitP95S < 60 || p.Resumes != 0 {
		t.Fatalf("no tier: p95 %.0fs, %d resumes; want a boot's wait and no resume", p.WaitP95S, p.Resumes)
	}
}

// A suspended second costs SuspendedCost of a running one in Utilization.
func TestUtilizationPricesSuspendedSeconds(t *testing.T) {
	jobs, start := burstyDay()
	jobs, _ = Window(jobs, 0, 4)
	cheap := tierConfig()
	cheap.SuspendedCost = 0.05
	dear := tierConfig()
	dear.SuspendedCost = 1
	a, b := run(t, jobs, start, cheap), run(t, jobs, start, dear)
	if a.SuspendedInstanceSeconds == 0 {
		t.Fatal("no suspended seconds")
	}
	want := b.BusySlotSeconds / b.InstanceSeconds
	if d := b.Utilization - want; d > 1e-9 || d < -1e-9 {
		t.Fatalf("cost 1: utilization %.4f, want busy/billed = %.4f", b.Utilization, want)
	}
	if a.Utilization <= want {
		t.Fatalf("cost 0.05: utilization %.4f not above %.4f", a.Utilization, want)
	}
}

func TestTimelineAndSVG(t *testing.T) {
	jobs, start := burstyDay()
	jobs, _ = Window(jobs, 0, 2)
	cfg := tierConfig()
	var samples []Sample
	cfg.Timeline = func(s Sample) { samples = append(samples, s) }
	res := run(t, jobs, start, cfg)
	if len(samples) < 100 {
		t.Fatalf("%d samples for two hours at one a minute", len(samples))
	}
	sawSuspended, sawDemand := false, false
	for _, s := range samples {
		sawSuspended = sawSuspended || s.Suspended > 0
		sawDemand = sawDemand || s.Demand >= 30
	}
	if !sawSuspended || !sawDemand {
		t.Fatalf("timeline never shows the tier (%v) or a burst (%v)", sawSuspended, sawDemand)
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, samples, res); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	for _, want := range []string{"<svg", "suspended", "booting", "target 15s", "</svg>"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if err := WriteSVG(&b, nil, res); err == nil {
		t.Error("an empty timeline drew a picture")
	}
}

func TestTierFlagsValidated(t *testing.T) {
	jobs, start := burstyDay()
	for _, c := range []func(*Config){
		func(c *Config) { c.ResumeTime = -time.Second },
		func(c *Config) { c.TargetWait = -time.Second },
		func(c *Config) { c.SuspendedCost = 2 },
	} {
		cfg := tierConfig()
		c(&cfg)
		if _, err := Run(jobs[:1], start, cfg); err == nil {
			t.Errorf("accepted %+v", cfg)
		}
	}
}
