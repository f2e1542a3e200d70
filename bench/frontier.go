package bench

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// The frontier: berth with only target_wait set, against the baselines at
// their best setting chosen in hindsight on the same trace. A policy that
// needs a hand-picked count is judged by the count that would have served
// this trace best, which no operator knows in advance: beating it, or
// coming within a few hundredths of its utilization, is the bar.

// Frontier families, in the order they are printed.
const (
	FamilyBerth     = "berth, target_wait"
	FamilyFixedPool = "berth, fixed suspended pool"
	FamilyWarmPool  = "warm-pool"
	FamilyNaiveIdle = "naive-idle"
)

// FrontierTargets are the target_wait settings berth is run with.
var FrontierTargets = []time.Duration{5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute}

// frontierSizes are the pool sizes swept for the baselines, doubling from 5
// with the steps 240 and 320 where large pipelines sit.
var frontierSizes = []int{5, 10, 20, 40, 80, 160, 240, 320, 480}

// frontierKeeps are how long the fixed pool keeps suspended instances
// beyond its count (suspended_idle_time): the ski-rental break-even at a
// 60 s boot and 0.1 cost, three times it, and two hours.
var frontierKeeps = []time.Duration{10 * time.Minute, 30 * time.Minute, 2 * time.Hour}

// Candidate is one run of a frontier sweep.
type Candidate struct {
	Family  string
	Setting string
	Config  Config
}

// FrontierCandidates is the sweep for base (its cloud, costs, limits and
// warmup): berth at every FrontierTargets, berth's core with a fixed
// suspended pool (suspended_idle_count × suspended_idle_time, no hot
// idle), warm-pool at every size and naive-idle at a few idle counts.
func FrontierCandidates(base Config) []Candidate {
	var cs []Candidate
	add := func(family, setting string, edit func(*Config)) {
		c := base
		c.Timeline, c.Progress = nil, nil
		c.IdleCount, c.ScaleFactor, c.ScaleFactorLimit = 0, 0, 0
		c.TargetWait, c.SuspendedIdleCount, c.SuspendedIdleTime, c.PoolSize, c.Schedule = 0, 0, 0, 0, nil
		edit(&c)
		cs = append(cs, Candidate{Family: family, Setting: setting, Config: c})
	}
	for _, t := range FrontierTargets {
		add(FamilyBerth, t.String(), func(c *Config) { c.Policy, c.TargetWait, c.IdleTime = PolicyBerth, t, 0 })
	}
	for _, n := range frontierSizes {
		for _, k := range frontierKeeps {
			add(FamilyFixedPool, fmt.Sprintf("%d, kept %s", n, shortDur(k)), func(c *Config) {
				c.Policy, c.SuspendedIdleCount, c.SuspendedIdleTime, c.IdleTime = PolicyBerth, n, k, 0
			})
		}
		add(FamilyWarmPool, fmt.Sprint(n), func(c *Config) { c.Policy, c.PoolSize, c.IdleTime = PolicyWarmPool, n, 0 })
	}
	for _, n := range []int{10, 40, 160} {
		for _, it := range []time.Duration{time.Minute, 10 * time.Minute} {
			add(FamilyNaiveIdle, fmt.Sprintf("%d, idle %s", n, shortDur(it)), func(c *Config) {
				c.Policy, c.IdleCount, c.IdleTime = PolicyNaiveIdle, n, it
			})
		}
	}
	return cs
}

// shortDur prints 10m0s as 10m and 2h0m0s as 2h.
func shortDur(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// FrontierRow is one candidate's result.
type FrontierRow struct {
	Family  string `json:"family"`
	Setting string `json:"setting"`
	Result  Result `json:"result"`
}

// RunFrontier replays jobs under every candidate, workers at a time (each
// run is single-threaded and independent), in the candidates' order.
func RunFrontier(jobs []Job, start time.Time, cs []Candidate, workers int) ([]FrontierRow, error) {
	rows := make([]FrontierRow, len(cs))
	errs := make([]error, len(cs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				res, err := Run(jobs, start, cs[i].Config)
				rows[i], errs[i] = FrontierRow{Family: cs[i].Family, Setting: cs[i].Setting, Result: res}, err
			}
		}()
	}
	for i := range cs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("frontier run %s %s: %w", cs[i].Family, cs[i].Setting, err)
		}
	}
	return rows, nil
}

// BestInHindsight is, per family other than berth's targets, the run with
// the most utilization whose p95 wait is within target, or, when none is,
// the one with the lowest p95 (most utilization among equals). Berth's
// target_wait rows are all kept: they are the curve, not a pick.
func BestInHindsight(rows []FrontierRow, target time.Duration) []FrontierRow {
	var out []FrontierRow
	best := map[string]int{}
	var order []string
	for i, r := range rows {
		if r.Family == FamilyBerth {
			out = append(out, r)
			continue
		}
		j, ok := best[r.Family]
		if !ok {
			best[r.Family] = i
			order = append(order, r.Family)
			continue
		}
		if better(r.Result, rows[j].Result, target) {
			best[r.Family] = i
		}
	}
	for _, f := range order {
		out = append(out, rows[best[f]])
	}
	return out
}

// better reports whether a beats b for a p95 target: meeting it beats not,
// then more utilization among those that meet it, lower p95 among those
// that do not.
func better(a, b Result, target time.Duration) bool {
	t := target.Seconds()
	am, bm := a.WaitP95S <= t, b.WaitP95S <= t
	switch {
	case am != bm:
		return am
	case am || a.WaitP95S == b.WaitP95S:
		return a.Utilization > b.Utilization
	}
	return a.WaitP95S < b.WaitP95S
}

// Verdict compares berth at target (the row whose target_wait is target)
// with the best hindsight rows: whether its p95 is within target, and its
// utilization less the best baseline's that meets the target. WithinMargin
// holds only when berth meets the target too: a utilization bought with
// waits over the target is no match for a baseline that keeps it.
type Verdict struct {
	BerthP95S    float64 `json:"berth_p95_s"`
	BerthUtil    float64 `json:"berth_utilization"`
	Met          bool    `json:"p95_met"`
	BestFamily   string  `json:"best_family,omitempty"`
	BestSetting  string  `json:"best_setting,omitempty"`
	BestUtil     float64 `json:"best_utilization"`
	UtilMargin   float64 `json:"utilization_margin"`
	WithinMargin bool    `json:"within_0_03"`
	// ClairvoyantUtil and ClairvoyantBoots are the clairvoyant reference's
	// on the trace (ClairvoyantSchedule); ClairvoyantRatio is berth's
	// utilization over it.
	ClairvoyantUtil  float64 `json:"clairvoyant_utilization"`
	ClairvoyantBoots int     `json:"clairvoyant_boots"`
	ClairvoyantRatio float64 `json:"clairvoyant_ratio"`
}

// Judge is the verdict for berth at target over the best rows.
func Judge(best []FrontierRow, target time.Duration) Verdict {
	var v Verdict
	i := slices.IndexFunc(best, func(r FrontierRow) bool {
		return r.Family == FamilyBerth && r.Result.TargetWaitS == target.Seconds()
	})
	if i < 0 {
		return v
	}
	b := best[i].Result
	v.BerthP95S, v.BerthUtil, v.Met = b.WaitP95S, b.Utilization, b.WaitP95S <= target.Seconds()
	v.ClairvoyantUtil, v.ClairvoyantBoots, v.ClairvoyantRatio = b.ClairvoyantUtilization, b.ClairvoyantBoots, b.ClairvoyantRatio
	for _, r := range best {
		if r.Family == FamilyBerth || r.Result.WaitP95S > target.Seconds() || r.Result.Utilization <= v.BestUtil {
			continue
		}
		v.BestFamily, v.BestSetting, v.BestUtil = r.Family, r.Setting, r.Result.Utilization
	}
	v.UtilMargin = v.BerthUtil - v.BestUtil
	v.WithinMargin = v.Met && v.UtilMargin >= -0.03
	return v
}
