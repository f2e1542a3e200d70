package bench

import (
	"math"
	"testing"
	"time"
)

// Five jobs priced by hand (boot 60 s, resume 10 s, suspended cost 0.1):
// A and E start together (two boots); B comes 5 s after A ends and takes
// A's instance, the one freed last (5 s hot); C comes 1000 s after B ends
// (a reboot, 60 s, beats 1000 s hot and 10 + 99 s suspended); D comes 300 s
// after C ends (suspended: 10 + 29 s beats a reboot's 60 s). E's instance is
// never used again and goes at once.
func TestClairvoyantScheduleByHand(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(s, d int) Job {
		return Job{Arrival: t0.Add(time.Duration(s) * time.Second), Duration: time.Duration(d) * time.Second}
	}
	jobs := []Job{at(0, 100), at(0, 10), at(105, 50), at(1155, 100), at(1555, 100)}
	cfg := Config{BootTime: time.Minute, ResumeTime: 10 * time.Second, SuspendedCost: 0.1}

	got := ClairvoyantSchedule(jobs, cfg)
	// hot: 2 boots 120 + reboot 60 + gap 5 + resume 10 + runs 360 = 555;
	// suspended 290 s at 0.1.
	if got.Boots != 3 || got.Resumes != 1 || got.InstanceSeconds != 845 || got.SuspendedInstanceSeconds != 290 {
		t.Errorf("got %+v; want 3 boots, 1 resume, 845 instance-seconds of which 290 suspended", got)
	}
	if want := 360.0 / 584; math.Abs(got.Utilization-want) > 1e-12 {
		t.Errorf("utilization %.4f; want 360/584 = %.4f", got.Utilization, want)
	}

	// A suspend that takes 40 s leaves D's 300 s gap 40 + 10 + 25 s: a
	// reboot (60 s) is cheaper now.
	cfg.SuspendTime = 40 * time.Second
	if got := ClairvoyantSchedule(jobs, cfg); got.Boots != 4 || got.Resumes != 0 {
		t.Errorf("suspend time 40 s: %+v; want 4 boots, no resume", got)
	}

	// Two slots per instance: the same slot schedule at half the price.
	cfg.SuspendTime, cfg.CapacityPerInstance = 0, 2
	if got := ClairvoyantSchedule(jobs, cfg); got.Boots != 2 || got.InstanceSeconds != 422.5 || math.Abs(got.Utilization-360.0/584) > 1e-12 {
		t.Errorf("2 slots per instance: %+v; want 2 boots, 422.5 instance-seconds, the same utilization", got)
	}
}

// The reference waits for nothing and is priced as the replay is, so no
// policy's utilization on a trace is above it; berth's ratio on a bursty day
// is a share of it.
func TestClairvoyantBoundsTheReplay(t *testing.T) {
	jobs, start := burstyDay()
	jobs, start = Window(jobs, 0, 6)
	for _, cfg := range []Config{tierConfig(), {Policy: PolicyStatic, StaticInstances: 40, BootTime: time.Minute, MaxInstances: 100}} {
		res, err := Run(jobs, start, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.ClairvoyantUtilization <= res.Utilization || res.ClairvoyantBoots == 0 || res.ClairvoyantBoots > res.Boots {
			t.Errorf("%s: utilization %.3f, boots %d; clairvoyant %.3f, %d boots: the reference must be above, on fewer boots",
				cfg.Policy, res.Utilization, res.Boots, res.ClairvoyantUtilization, res.ClairvoyantBoots)
		}
		if want := res.Utilization / res.ClairvoyantUtilization; res.ClairvoyantRatio != want {
			t.Errorf("%s: ratio %.4f; want %.4f", cfg.Policy, res.ClairvoyantRatio, want)
		}
	}
}
