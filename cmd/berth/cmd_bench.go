package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/bench"
)

// newBenchCmd is `berth bench`: replay a job trace through the real core and
// the simulated cloud on virtual time, or through one of the baselines.
func newBenchCmd() *cobra.Command {
	def := bench.DefaultConfig()
	cfg := def
	var (
		trace       string
		from        time.Duration
		hours       float64
		maxDuration time.Duration
		asJSON      bool
		svgFile     string
		schedule    []string
		htmlFile    string
		jobsFile    string
		ff          frontierFlags
	)
	cmd := &cobra.Command{
		Use:   "bench --trace FILE [flags]",
		Short: "Replay a job trace through the scaler and a simulated cloud on virtual time",
		Long: `Replay a job trace (CSV "arrival_unix_s,duration_s") through berth's real core
and a simulated cloud on a virtual clock, and report waits, cost and failures.
Each job is booked, waits for a slot, runs for its duration and is released; a
job that cannot be booked waits in a queue, it does not fail.

--policy picks what schedules the jobs: berth (the real core), naive-idle
(docker+machine's IdleCount loop), late-acquire (GitLab's instance executor
before bookings: capacity checked, job taken, instance acquired afterwards) or
static (a fixed pool of --static-instances), warm-pool (naive-idle plus
--pool-size stopped instances, as AWS warm pools) or scheduled (warm-pool with a
pool per time window: --schedule "CRON=N", repeated).

berth keeps a suspended tier of idle instances with --suspended-idle-time D
(or --target-wait D, which sizes the hot and suspended pools from the arrival
pattern it learns); --resume-time is the simulated resume, and utilization
counts a suspended second at --suspended-cost. --svg FILE draws what the
policy did over time.`,
		Example: `  berth bench --trace bench/testdata/google2011_2011-05-16T21Z_4h_jobs.csv --max-duration 1h --idle-count 5 --max-instances 200
  berth bench --trace "$BERTH_TRACES/travis_2020-10-05_7d_jobs.csv" --boot-time 60s --resume-time 10s --suspended-cost 0.1 --target-wait 15s --max-instances 300 --svg week.svg
  berth bench --trace "$BERTH_TRACES/google2011_2011-05-16_7d_jobs.csv" --max-duration 3h --max-instances 300 --policy naive-idle --json
  berth bench convert gitlab jobs.json -o my-ci.csv   # docs/bench.md: get traces, export your CI`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := benchPolicyFlags(cmd, &cfg, schedule); err != nil {
				return err
			}
			if trace == "" {
				return errors.New("--trace FILE is required: a CSV with header arrival_unix_s,duration_s, e.g. bench/testdata/google2011_2011-05-16T21Z_4h_jobs.csv in the source tree; docs/bench.md says how to get whole traces or export your own CI history (berth bench convert)")
			}
			if from < 0 || hours < 0 || maxDuration < 0 {
				return errors.New("--from, --hours and --max-duration must not be negative")
			}
			all, err := bench.LoadTrace(trace)
			if err != nil {
				return err
			}
			jobs, start := bench.Window(all, from, hours)
			if len(jobs) == 0 {
				return fmt.Errorf("no jobs in the window --from %s --hours %g of %s", from, hours, trace)
			}
			jobs = bench.CapDurations(jobs, maxDuration)
			if ff.on {
				return runBenchFrontier(cmd.OutOrStdout(), jobs, start, cfg, ff, asJSON)
			}
			var samples []bench.Sample
			if svgFile != "" || htmlFile != "" {
				cfg.Timeline = func(s bench.Sample) { samples = append(samples, s) }
			}
			// --target-wait lets berth size the pools: unless told
			// otherwise, no hot idle time beyond the floor.
			if cfg.TargetWait > 0 && !cmd.Flags().Changed("idle-time") {
				cfg.IdleTime = 0
			}
			var jobLog *benchJobLog
			if jobsFile != "" {
				// The replay starts at the window's start or its first
				// arrival, whichever is earlier (bench.Run).
				from := start
				if jobs[0].Arrival.Before(from) {
					from = jobs[0].Arrival
				}
				jobLog = newBenchJobLog(jobs, from, cfg.Warmup)
				cfg.JobStarted = jobLog.record
			}
			if benchIsTerminal(os.Stderr) {
				cfg.Progress = benchProgressBar(cmd.ErrOrStderr())
			}
			res, err := bench.Run(jobs, start, cfg)
			if cfg.Progress != nil {
				fmt.Fprint(cmd.ErrOrStderr(), "\r\033[K")
			}
			if err != nil {
				return err
			}
			res.Trace = trace
			res.FromS = from.Seconds()
			res.Hours = hours
			res.MaxDurationS = maxDuration.Seconds()
			if svgFile != "" {
				if err := writeBenchSVG(svgFile, samples, res); err != nil {
					return err
				}
			}
			if htmlFile != "" {
				if err := writeBenchHTML(htmlFile, samples, res); err != nil {
					return err
				}
			}
			if jobLog != nil {
				if err := jobLog.write(jobsFile); err != nil {
					return err
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			return printBenchTable(out, res)
		},
	}
	f := cmd.Flags()
	f.StringVar(&trace, "trace", "", "job trace, CSV arrival_unix_s,duration_s")
	f.DurationVar(&from, "from", 0, "start the window this long after the trace's first arrival")
	f.Float64Var(&hours, "hours", 0, "replay only this many hours from --from (0: to the end)")
	f.DurationVar(&maxDuration, "max-duration", 0, "cap job durations (0: no cap)")
	f.DurationVar(&cfg.BootTime, "boot-time", def.BootTime, "time from asking for an instance to it running")
	f.DurationVar(&cfg.BootJitter, "boot-jitter", def.BootJitter, "random extra boot time, 0..D per instance")
	f.DurationVar(&cfg.ListingLag, "listing-lag", def.ListingLag, "time before a new instance shows in the provider's listing")
	f.IntVar(&cfg.CapacityPerInstance, "capacity-per-instance", def.CapacityPerInstance, "job slots per instance")
	f.IntVar(&cfg.MaxInstances, "max-instances", def.MaxInstances, "most instances at once")
	f.IntVar(&cfg.IdleCount, "idle-count", def.IdleCount, "idle slots to keep ready")
	f.DurationVar(&cfg.IdleTime, "idle-time", def.IdleTime, "how long an idle instance stays before scale-in")
	f.Float64Var(&cfg.ScaleFactor, "scale-factor", def.ScaleFactor, "extra idle slots as a fraction of slots in use")
	f.IntVar(&cfg.ScaleFactorLimit, "scale-factor-limit", def.ScaleFactorLimit, "cap on what --scale-factor adds")
	f.BoolVar(&cfg.Preemptive, "preemptive", def.Preemptive, "book only idle slots on ready instances (default: on-demand)")
	f.DurationVar(&cfg.ResumeTime, "resume-time", def.ResumeTime, "time to resume a suspended instance")
	f.Float64Var(&cfg.SuspendedCost, "suspended-cost", 0.1, "cost of a suspended instance-second relative to a running one")
	f.DurationVar(&cfg.SuspendedIdleTime, "suspended-idle-time", def.SuspendedIdleTime, "berth: suspend idle instances past --idle-time and delete them after this (0: no suspended tier)")
	f.IntVar(&cfg.SuspendedIdleCount, "suspended-idle-count", def.SuspendedIdleCount, "berth: suspended idle instances kept at least")
	f.DurationVar(&cfg.TargetWait, "target-wait", def.TargetWait, "berth: p95 wait to aim at; sizes hot and suspended pools from the arrival forecast (sets --idle-time 0s unless given)")
	f.StringVar(&cfg.Policy, "policy", def.Policy, "berth|naive-idle|late-acquire|static|warm-pool|scheduled")
	f.IntVar(&cfg.StaticInstances, "static-instances", 0, "pool size for --policy static")
	f.DurationVar(&cfg.AcquireTimeout, "acquire-timeout", def.AcquireTimeout, "how long a taken job may wait for its instance")
	f.Uint64Var(&cfg.Seed, "seed", 0, "seed of the simulated cloud")
	f.DurationVar(&cfg.PollInterval, "poll-interval", def.PollInterval, "how often the provider is listed (a state change is seen this late)")
	addBenchPollFlags(f, &cfg)
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	f.StringVar(&htmlFile, "html", "", "also write an HTML report with zoomable charts (as the web console's) of the replay into this file")
	f.StringVar(&jobsFile, "jobs", "", "also write one CSV line per job into this file: job,arrival_unix_s,arrival_utc,wait_s,counted (measured or warmup)")
	f.StringVar(&svgFile, "svg", "", "also draw demand, hot, suspended and booting instances and the wait over time into this SVG file")
	addBenchPoolFlags(f, &cfg, &schedule)
	addBenchFrontierFlags(f, &ff)
	cmd.AddCommand(newBenchConvertCmd(), newBenchGenerateCmd())
	return cmd
}

// writeBenchSVG writes the replay's picture to path.
func writeBenchSVG(path string, samples []bench.Sample, res bench.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--svg: %w", err)
	}
	if err := bench.WriteSVG(f, samples, res); err != nil {
		f.Close()
		return fmt.Errorf("--svg %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--svg %s: %w", path, err)
	}
	return nil
}

// benchIsTerminal reports whether f is a terminal, so that a progress bar never
// ends up in a file or a pipe.
func benchIsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// benchProgressBar returns a bench progress callback drawing on w at most ten
// times a second.
func benchProgressBar(w io.Writer) func(done, total int) {
	var last time.Time
	return func(done, total int) {
		if now := time.Now(); now.Sub(last) < 100*time.Millisecond && done < total {
			return
		} else {
			last = now
		}
		const width = 40
		n := 0
		if total > 0 {
			n = done * width / total
		}
		fmt.Fprintf(w, "\r[%s%s] %d/%d jobs", strings.Repeat("=", n), strings.Repeat(" ", width-n), done, total)
	}
}

func printBenchTable(w io.Writer, r bench.Result) error {
	rows := [][2]string{
		{"policy", r.Policy},
		{"trace", r.Trace},
		{"window", fmt.Sprintf("from %s, %s", time.Duration(r.FromS*float64(time.Second)), benchHoursText(r.Hours))},
		{"max job duration", benchDurText(r.MaxDurationS, "none")},
		{"boot time / jitter", fmt.Sprintf("%s / %s", benchDurText(r.BootTimeS, "0s"), benchDurText(r.BootJitterS, "0s"))},
		{"listing lag", benchDurText(r.ListingLagS, "0s")},
		{"capacity per instance", fmt.Sprint(r.CapacityPerInstance)},
		{"max instances", fmt.Sprint(r.MaxInstances)},
		{"idle count / idle time", fmt.Sprintf("%d / %s", r.IdleCount, benchDurText(r.IdleTimeS, "0s"))},
		{"scale factor / limit", fmt.Sprintf("%g / %d", r.ScaleFactor, r.ScaleFactorLimit)},
		{"mode", map[bool]string{true: "preemptive", false: "on-demand"}[r.Preemptive]},
		{"resume / suspend time / suspended cost", fmt.Sprintf("%s / %s / %g", benchDurText(r.ResumeTimeS, "0s"), benchDurText(r.SuspendTimeS, "0s"), r.SuspendedCost)},
		{"suspended idle time / count", fmt.Sprintf("%s / %d", benchDurText(r.SuspendedIdleTimeS, "off"), r.SuspendedIdleCount)},
		{"target wait", benchDurText(r.TargetWaitS, "none")},
	}
	if r.Policy == bench.PolicyStatic {
		rows = append(rows, [2]string{"static instances", fmt.Sprint(r.StaticInstances)})
	}
	if r.Policy == bench.PolicyWarmPool {
		rows = append(rows, [2]string{"pool size", fmt.Sprint(r.PoolSize)})
	}
	if r.WarmupS > 0 {
		rows = append(rows, [2]string{"warmup", benchDurText(r.WarmupS, "0s")})
	}
	rows = append(rows,
		[2]string{"", ""},
		[2]string{"jobs", fmt.Sprint(r.Jobs)},
		[2]string{"completed", fmt.Sprint(r.Completed)},
		[2]string{"failed (capacity)", fmt.Sprint(r.FailedCapacity)},
		[2]string{"failed (provider)", fmt.Sprint(r.FailedProvider)},
		[2]string{"jobs measured (after warmup)", fmt.Sprint(r.Measured)},
		[2]string{"wait p50 / p95 / p99", fmt.Sprintf("%.0fs / %.0fs / %.0fs", r.WaitP50S, r.WaitP95S, r.WaitP99S)},
		[2]string{"wait max", fmt.Sprintf("%.0fs", r.WaitMaxS)},
		[2]string{"instance hours", fmt.Sprintf("%.1f", r.InstanceSeconds/3600)},
		[2]string{"  of which suspended", fmt.Sprintf("%.1f", r.SuspendedInstanceSeconds/3600)},
		[2]string{"busy slot hours", fmt.Sprintf("%.1f", r.BusySlotSeconds/3600)},
		[2]string{"utilization", fmt.Sprintf("%.1f%%", 100*r.Utilization)},
		[2]string{"clairvoyant utilization / boots", fmt.Sprintf("%.1f%% / %d (this run reaches %.2f of it)", 100*r.ClairvoyantUtilization, r.ClairvoyantBoots, r.ClairvoyantRatio)},
		[2]string{"peak instances", fmt.Sprint(r.PeakInstances)},
		[2]string{"moments above max", fmt.Sprint(r.MaxInstancesExceeded)},
		[2]string{"boots / resumes", fmt.Sprintf("%d / %d", r.Boots, r.Resumes)},
		[2]string{"instances created", fmt.Sprint(r.InstancesCreated)},
		[2]string{"instances deleted", fmt.Sprint(r.InstancesDeleted)},
		[2]string{"provider calls", fmt.Sprint(r.ProviderCalls)},
		[2]string{"virtual time", time.Duration(r.VirtualSeconds * float64(time.Second)).Round(time.Second).String()},
		[2]string{"wall time", fmt.Sprintf("%.2fs", r.WallSeconds)},
	)
	reasons := make([]string, 0, len(r.FailureReasons))
	for k := range r.FailureReasons {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	for _, k := range reasons {
		rows = append(rows, [2]string{"  failure", fmt.Sprintf("%d × %s", r.FailureReasons[k], k)})
	}
	width := 0
	for _, row := range rows {
		width = max(width, len(row[0]))
	}
	for _, row := range rows {
		if row[0] == "" {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
			continue
		}
		if _, err := fmt.Fprintf(w, "%-*s  %s\n", width, row[0], row[1]); err != nil {
			return err
		}
	}
	return nil
}

func benchDurText(s float64, zero string) string {
	if s == 0 {
		return zero
	}
	return time.Duration(s * float64(time.Second)).String()
}

func benchHoursText(h float64) string {
	if h == 0 {
		return "to the end"
	}
	return fmt.Sprintf("%g h", h)
}
