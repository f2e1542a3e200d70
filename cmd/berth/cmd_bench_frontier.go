package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/berth-ci/berth/bench"
)

// frontierFlags are `berth bench --frontier`'s own flags.
type frontierFlags struct {
	on      bool
	target  time.Duration
	workers int
}

func addBenchFrontierFlags(f *pflag.FlagSet, ff *frontierFlags) {
	f.BoolVar(&ff.on, "frontier", false, "sweep berth's target_wait (5s..60s) and the baselines (berth with a fixed suspended pool, warm-pool, naive-idle) on the trace and print berth against each baseline at its best setting in hindsight")
	f.DurationVar(&ff.target, "frontier-target", 15*time.Second, "--frontier: the p95 wait a baseline's best setting must meet")
	f.IntVar(&ff.workers, "parallel", 2, "--frontier: replays run at once")
}

// runBenchFrontier runs the frontier sweep on jobs with base's cloud, costs
// and limits, and prints the berth rows, the best baselines and the verdict.
func runBenchFrontier(out io.Writer, jobs []bench.Job, start time.Time, base bench.Config, ff frontierFlags, asJSON bool) error {
	if ff.target <= 0 {
		return errors.New("--frontier-target must be above 0, e.g. 15s")
	}
	rows, err := bench.RunFrontier(jobs, start, bench.FrontierCandidates(base), ff.workers)
	if err != nil {
		return err
	}
	best := bench.BestInHindsight(rows, ff.target)
	v := bench.Judge(best, ff.target)
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			TargetS float64             `json:"target_s"`
			Best    []bench.FrontierRow `json:"best"`
			Verdict bench.Verdict       `json:"verdict"`
			All     []bench.FrontierRow `json:"all"`
		}{ff.target.Seconds(), best, v, rows})
	}
	fmt.Fprintf(out, "| policy | setting | wait p50 / p95 (s) | utilization | boots |\n|---|---|---|---|---|\n")
	for _, r := range best {
		fmt.Fprintf(out, "| %s | %s | %.0f / %.0f | %.3f | %d |\n", r.Family, r.Setting, r.Result.WaitP50S,
			r.Result.WaitP95S, r.Result.Utilization, r.Result.Boots)
	}
	fmt.Fprintf(out, "\nberth at target_wait %s: p95 %.0f s (met: %v), utilization %.3f; ", ff.target, v.BerthP95S, v.Met, v.BerthUtil)
	if v.BestFamily == "" {
		fmt.Fprintf(out, "no baseline meets p95 <= %s\n", ff.target)
	} else {
		fmt.Fprintf(out, "best baseline meeting it: %s %s at %.3f (berth %+.3f, within 0.03: %v)\n",
			v.BestFamily, v.BestSetting, v.BestUtil, v.UtilMargin, v.WithinMargin)
	}
	fmt.Fprintf(out, "clairvoyant (every job known in advance, no wait): utilization %.3f, %d boots; berth at target_wait %s reaches %.2f of it\n",
		v.ClairvoyantUtil, v.ClairvoyantBoots, ff.target, v.ClairvoyantRatio)
	return nil
}
