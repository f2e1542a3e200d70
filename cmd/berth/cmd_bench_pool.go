package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/berth-ci/berth/bench"
	"github.com/berth-ci/berth/policy"
)

// addBenchPoolFlags adds the flags of the honest bench: suspend time,
// warmup, and the warm-pool and scheduled baselines.
func addBenchPoolFlags(f *pflag.FlagSet, cfg *bench.Config, schedule *[]string) {
	f.Bool("no-history", false, "start from an empty arrival model and measure from the first job (a new install; the bench never loads a model, and --warmup is the way to measure after some learned history)")
	f.DurationVar(&cfg.SuspendTime, "suspend-time", 0, "time to suspend an instance (billed at full price meanwhile; it cannot be resumed before it is suspended)")
	f.DurationVar(&cfg.Warmup, "warmup", 0, "leave jobs arriving in the first DURATION out of the wait statistics (they are replayed and billed)")
	f.String("timezone", "", `the policy's time zone, an IANA name such as "Europe/Berlin" ([[autoscaler.policy]] timezone; default UTC): berth's learned profile counts hours in it, and --schedule's windows are read in it`)
	f.IntVar(&cfg.PoolSize, "pool-size", 0, "warm-pool: stopped instances kept for scale-out")
	f.StringArrayVar(schedule, "schedule", nil, `scheduled: "CRON=N" keeps N stopped instances while the 5-field cron expression matches (repeat; the last match wins, the first is the default)`)
}

// benchPolicyFlags checks the flags that zero or a combination makes
// meaningless, and turns --schedule into policy periods.
func benchPolicyFlags(cmd *cobra.Command, cfg *bench.Config, schedule []string) error {
	if cmd.Flags().Changed("suspended-cost") && cfg.SuspendedCost <= 0 {
		return fmt.Errorf("--suspended-cost %g: give a cost above 0 and at most 1 (a suspended instance still bills its disk; 0.1 is typical)", cfg.SuspendedCost)
	}
	if nh, _ := cmd.Flags().GetBool("no-history"); nh && cfg.Warmup > 0 {
		return fmt.Errorf("--no-history measures from the first job with nothing learned; --warmup %s measures after the first %s was learned: give one of them", cfg.Warmup, cfg.Warmup)
	}
	if len(schedule) > 0 && cfg.Policy != bench.PolicyScheduled {
		return errors.New("--schedule is for --policy scheduled")
	}
	if cmd.Flags().Changed("pool-size") && cfg.Policy != bench.PolicyWarmPool {
		return errors.New("--pool-size is for --policy warm-pool")
	}
	tz, _ := cmd.Flags().GetString("timezone")
	loc, err := policy.LoadTimezone(tz)
	if err != nil {
		return fmt.Errorf("--timezone: %w", err)
	}
	cfg.Timezone = loc
	for _, s := range schedule {
		spec, n, ok := strings.Cut(s, "=")
		count, err := strconv.Atoi(strings.TrimSpace(n))
		if !ok || err != nil || count < 0 {
			return fmt.Errorf(`--schedule %q: want "CRON=N", e.g. "* 9-17 * * 1-5=40" (N stopped instances, 0 or more)`, s)
		}
		cfg.Schedule = append(cfg.Schedule, policy.Period{
			Periods:  []string{strings.TrimSpace(spec)},
			Timezone: tz,
			Policy:   policy.Policy{SuspendedIdleCount: count},
		})
	}
	return nil
}
