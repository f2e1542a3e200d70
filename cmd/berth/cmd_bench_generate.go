package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/bench"
)

// newBenchGenerateCmd is `berth bench generate`: a synthetic trace of one of
// the CI shapes in bench.Generate, or an existing trace with jittered
// arrivals, for judging a policy on traffic it was not tuned on.
func newBenchGenerateCmd() *cobra.Command {
	var (
		seed   uint64
		weeks  int
		trace  string
		maxJit time.Duration
	)
	cmd := &cobra.Command{
		Use:   "generate SHAPE|jitter FILE [--seed N] [--weeks N]",
		Short: "Write a synthetic CI trace (CSV arrival_unix_s,duration_s) of a known shape",
		Long: `Write a bench trace of one shape, the same for the same --seed:
  office    builds of 10-40 jobs every ~20 min, 9-18 h on weekdays
  monorepo  pipelines of 50-200 jobs every ~10 min, around the clock
  nightly   500 jobs within 2 min at 02:00 daily, a trickle from 8 to 20 h
  poisson   one job every ~10 s
  weekend   3 jobs/h on weekdays; Sat and Sun 5 batches a day at random hours,
            each 150-400 jobs of ~30 min within 60 s
  lowvolume 20 jobs a day at random times
  teamchange  Monday an office day; from Tuesday another team, 14-23 h,
            pipelines of 40-120 jobs every ~20 min and 500 jobs at 14:00
  growth    builds of 5-30 jobs 8-20 h, every ~30 min on Monday growing to
            every ~6 min by Sunday (weekends half), a job every ~30 min at night
  twooffices  office builds 9-18 h and 17-02 h UTC (two offices 8 h apart)
  release   office days; Thursday builds of 20-80 jobs every ~10 min and
            300 jobs at 16:00
  dst       office builds 9-18 h in New York from Thursday 2026-03-05; the
            clocks go forward on Sunday (replay with --timezone America/New_York)
  jitter    the jobs of --trace, each moved later by a random 0..--max-shift
Traces start on a Monday, 2026-01-05 00:00 UTC (dst: 2026-03-05 05:00 UTC).`,
		Example: `  berth bench generate office office.csv --seed 1 --weeks 2
  berth bench generate jitter travis-jitter.csv --trace "$BERTH_TRACES/travis_2020-10-05_7d_jobs.csv" --max-shift 5s`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			shape, out := args[0], args[1]
			var jobs []bench.Job
			var err error
			if shape == "jitter" {
				if trace == "" {
					return errors.New("generate jitter needs --trace FILE, the trace whose arrivals to move")
				}
				if maxJit < time.Second {
					return fmt.Errorf("--max-shift %s: give at least 1s", maxJit)
				}
				if jobs, err = bench.LoadTrace(trace); err != nil {
					return err
				}
				jobs = bench.Jitter(jobs, seed, maxJit)
			} else if jobs, err = bench.Generate(shape, seed, weeks); err != nil {
				return err
			}
			return writeTraceFile(out, jobs)
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&seed, "seed", 1, "random seed; the same seed makes the same trace")
	f.IntVar(&weeks, "weeks", 1, "weeks of trace (every shape but jitter)")
	f.StringVar(&trace, "trace", "", "jitter: the trace whose arrivals to move")
	f.DurationVar(&maxJit, "max-shift", 5*time.Second, "jitter: the largest move of an arrival")
	return cmd
}

// writeTraceFile writes jobs as a trace CSV to path, removing a partial file
// on error.
func writeTraceFile(path string, jobs []bench.Job) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write trace: %w", err)
	}
	if err := bench.WriteTrace(f, jobs); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("write trace %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("write trace %s: %w", path, err)
	}
	return nil
}
