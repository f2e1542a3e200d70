package bench

import (
	"testing"
	"time"
)

// The best setting in hindsight is the most utilization among the runs
// that meet the target; when none does, the lowest p95.
func TestBestInHindsight(t *testing.T) {
	r := func(family, setting string, p95, util float64) FrontierRow {
		return FrontierRow{Family: family, Setting: setting, Result: Result{WaitP95S: p95, Utilization: util, TargetWaitS: 15}}
	}
	rows := []FrontierRow{
		r(FamilyBerth, "15s", 14, 0.80),
		r(FamilyFixedPool, "10", 40, 0.90), // more utilization, but misses the target
		r(FamilyFixedPool, "40", 14, 0.78),
		r(FamilyFixedPool, "80", 13, 0.70),
		r(FamilyWarmPool, "10", 50, 0.90),
		r(FamilyWarmPool, "20", 30, 0.80), // none meets 15 s: the lowest p95
	}
	best := BestInHindsight(rows, 15*time.Second)
	want := []string{"15s", "40", "20"}
	if len(best) != len(want) {
		t.Fatalf("best: %+v", best)
	}
	for i, w := range want {
		if best[i].Setting != w {
			t.Errorf("row %d (%s): setting %s, want %s", i, best[i].Family, best[i].Setting, w)
		}
	}
	v := Judge(best, 15*time.Second)
	if !v.Met || v.BestFamily != FamilyFixedPool || v.BestSetting != "40" || !v.WithinMargin {
		t.Errorf("verdict %+v: want met, best fixed pool 40, within 0.03", v)
	}
	if d := v.UtilMargin - 0.02; d > 1e-9 || d < -1e-9 {
		t.Errorf("margin %.3f, want +0.02", v.UtilMargin)
	}
}

// The sweep runs every candidate on the trace: berth at each target with
// only target_wait set, and berth's own core with a fixed suspended pool.
func TestRunFrontier(t *testing.T) {
	jobs, start := burstyDay()
	jobs, start = Window(jobs, 0, 3)
	base := tierConfig()
	base.SuspendedIdleTime = 0
	cs := FrontierCandidates(base)
	fixed := 0
	for _, c := range cs {
		switch c.Family {
		case FamilyBerth:
			if c.Config.Policy != PolicyBerth || c.Config.TargetWait <= 0 || c.Config.SuspendedIdleCount != 0 || c.Config.IdleCount != 0 {
				t.Errorf("berth candidate %s: %+v", c.Setting, c.Config)
			}
		case FamilyFixedPool:
			fixed++
			if c.Config.Policy != PolicyBerth || c.Config.TargetWait != 0 || c.Config.SuspendedIdleCount <= 0 || c.Config.SuspendedIdleTime <= 0 {
				t.Errorf("fixed pool candidate %s: %+v", c.Setting, c.Config)
			}
		}
	}
	if fixed != len(frontierSizes)*len(frontierKeeps) {
		t.Errorf("%d fixed-pool candidates, want %d", fixed, len(frontierSizes)*len(frontierKeeps))
	}
	rows, err := RunFrontier(jobs, start, cs, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(cs) {
		t.Fatalf("%d rows for %d candidates", len(rows), len(cs))
	}
	for i, row := range rows {
		if row.Setting != cs[i].Setting || row.Result.Jobs != len(jobs) || row.Result.FailedCapacity != 0 {
			t.Errorf("row %d %s %s: jobs %d failed %d", i, row.Family, row.Setting, row.Result.Jobs, row.Result.FailedCapacity)
		}
	}
	best := BestInHindsight(rows, 15*time.Second)
	if len(best) != len(FrontierTargets)+3 {
		t.Errorf("%d best rows, want the %d targets and 3 baselines", len(best), len(FrontierTargets))
	}
}

// A berth run that misses the target is never "within 0.03", however close
// its utilization: the verdict would otherwise call a miss a match.
func TestJudgeMissIsNotWithinMargin(t *testing.T) {
	best := []FrontierRow{
		{Family: FamilyBerth, Setting: "15s", Result: Result{WaitP95S: 29, Utilization: 0.81, TargetWaitS: 15}},
		{Family: FamilyFixedPool, Setting: "240, kept 10m", Result: Result{WaitP95S: 14, Utilization: 0.80}},
	}
	v := Judge(best, 15*time.Second)
	if v.Met || v.WithinMargin || v.BestSetting != "240, kept 10m" {
		t.Errorf("verdict %+v: want not met and not within 0.03 (p95 29 s > 15 s)", v)
	}
	best[0].Result.WaitP95S = 15
	if v := Judge(best, 15*time.Second); !v.Met || !v.WithinMargin {
		t.Errorf("verdict %+v: want met and within 0.03 at p95 15 s", v)
	}
}
