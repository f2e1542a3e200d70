// Package bench replays a job trace through berth's real core (package
// scaler) and the simulated cloud (provider/sim) on virtual time, and
// through faithful models of the autoscalers berth replaces, so that their
// waits, costs and failures can be compared on the same workload.
//
// The replay is a discrete-event simulation driven from one goroutine, as
// the core itself wants (one owner). Its events are job arrivals, job
// completions, state changes of the simulated cloud (sim.NextEventTime),
// the periodic provider listing (Update, then Observe), the core's periodic
// Tick, and acquire timeouts. The clock jumps from one event to the next,
// so a week of trace takes seconds.
//
// Every job lives the same way under every policy: it arrives, waits in a
// FIFO queue until the policy gives it a slot, runs for its duration and
// gives the slot back. Under berth a job leaves the queue only against a
// booking (Reserve), and a job that cannot be booked simply waits.
package bench

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/sim"
)

// Policy names, as given to --policy.
const (
	// PolicyBerth is the real core: bookings before jobs, one consistent
	// scaling view.
	PolicyBerth = "berth"
	// PolicyNaiveIdle models docker+machine's IdleCount loop; see naiveDriver.
	PolicyNaiveIdle = "naive-idle"
	// PolicyLateAcquire models GitLab's instance executor before bookings;
	// see coreDriver.
	PolicyLateAcquire = "late-acquire"
	// PolicyStatic is a fixed pool; see staticDriver.
	PolicyStatic = "static"
	// PolicyWarmPool is naive-idle plus a fixed pool of suspended
	// instances, as AWS warm pools do; see warmPoolDriver.
	PolicyWarmPool = "warm-pool"
	// PolicyScheduled is warm-pool with a pool size per time window, from
	// policy periods (Config.Schedule).
	PolicyScheduled = "scheduled"
)

// Policies lists the policies Run accepts.
var Policies = []string{PolicyBerth, PolicyNaiveIdle, PolicyLateAcquire, PolicyStatic, PolicyWarmPool, PolicyScheduled}

// Config is one replay's settings. Durations and counts mean what they
// say, zero included (no boot time, no listing lag, no idle pool); only
// fields where zero makes no sense get a default. DefaultConfig has the
// defaults of `berth bench`.
type Config struct {
	// Policy is one of Policies (default berth).
	Policy string
	// BootTime is how long a new instance takes to run; BootJitter adds a
	// random 0..BootJitter per instance.
	BootTime   time.Duration
	BootJitter time.Duration
	// ListingLag is how long a new instance stays missing from listings.
	ListingLag time.Duration
	// CapacityPerInstance is slots per instance (default 1).
	CapacityPerInstance int
	// MaxInstances bounds the fleet (default 10, as in berth's config).
	MaxInstances int
	// IdleCount, IdleTime, ScaleFactor and ScaleFactorLimit are the pool
	// policy, in slots (docs/semantics.md, "Scaling").
	IdleCount        int
	IdleTime         time.Duration
	ScaleFactor      float64
	ScaleFactorLimit int
	// Preemptive books only idle slots on ready instances; otherwise
	// (on-demand) a booking starts provisioning.
	Preemptive bool
	// ResumeTime is how long a suspended instance takes to run again
	// (the simulated cloud's resume latency).
	ResumeTime time.Duration
	// SuspendTime is how long a suspend takes: the instance is billed at
	// the full price meanwhile and cannot be resumed before it is
	// suspended (the simulated cloud's suspend latency).
	SuspendTime time.Duration
	// SuspendedCost is what a suspended instance-second costs relative to
	// a running one, in Utilization and in berth's sizing (default 0.1 when
	// left 0; `berth bench` rejects an explicit 0).
	SuspendedCost float64
	// SuspendedIdleTime turns on berth's suspended tier: idle instances
	// past IdleTime are suspended, and deleted after this. SuspendedIdleCount
	// is the tier's floor. TargetWait is berth's target_wait (p95).
	SuspendedIdleTime  time.Duration
	SuspendedIdleCount int
	TargetWait         time.Duration
	// StaticInstances is the pool size of the static policy.
	StaticInstances int
	// PoolSize is the suspended pool of the warm-pool policy.
	PoolSize int
	// Schedule gives the scheduled policy its suspended pool per time
	// window: the active period's SuspendedIdleCount (policy.Schedule
	// semantics: the last matching period wins, the first is the default).
	Schedule []policy.Period
	// Timezone is the policy's time zone (policy.Period.Timezone; nil is
	// UTC): berth's learned profile counts its hours in it
	// (scaler.Config.ProfileZone), and Schedule's windows are read in it.
	Timezone *time.Location
	// Warmup leaves the jobs arriving in the first Warmup of the replay out
	// of the wait statistics (they are replayed, and billed, all the same):
	// a learning policy is judged once it had the time to learn.
	Warmup time.Duration
	// AcquireTimeout is how long a taken job may wait for its instance
	// before it fails (default 15m, instance_acquire_timeout).
	AcquireTimeout time.Duration
	// Seed seeds the simulated cloud.
	Seed uint64

	// PollInterval is how often the provider is listed (Update + Observe;
	// default 5s). TickInterval is how often the core's Tick runs (default
	// 5s). CheckInterval is naive-idle's IdleCount loop (default 10s, as
	// docker+machine's check loop).
	PollInterval  time.Duration
	TickInterval  time.Duration
	CheckInterval time.Duration

	// Cloud adds misbehaviour to the simulated cloud (fail rates, quota,
	// delete latency, ...). Its BootTime, BootJitter, ListingLag and Seed
	// are overridden by the fields above.
	Cloud sim.Config

	// PollConcurrency models a polling job source (GitLab) with this many
	// long-polls in flight; 0 models the built-in queue. PollsAsDemand
	// books polls as jobs, as berth did before poll bookings (poll.go).
	PollConcurrency int
	PollsAsDemand   bool

	// Progress, if set, is called now and then with the jobs finished so
	// far and the total, for a progress bar.
	Progress func(finished, total int)
	// Timeline, if set, receives one Sample per SampleEvery of virtual time
	// (default 1m), for a picture of what the policy did.
	Timeline    func(Sample)
	SampleEvery time.Duration
	// JobStarted, if set, is called when job j (its index in the replayed
	// jobs) gets its slot, with its wait from arrival and whether that
	// wait counts in the statistics (false: it arrived in the warm-up).
	// It says which jobs waited, which p95 alone does not.
	JobStarted func(j int, wait time.Duration, measured bool)
}

// Sample is the state of a replay at one moment, for the SVG picture.
type Sample struct {
	At time.Time
	// Demand is jobs that arrived and have not finished (queued or running).
	Demand int
	// Running, Booting and Suspended count instances in the cloud by state
	// (Running includes resuming and hot idle ones).
	Running   int
	Booting   int
	Suspended int
	// Busy is jobs running.
	Busy int
	// MaxWait is the longest wait of a job that started since the last
	// sample, in seconds.
	MaxWait float64
}

// DefaultConfig returns the defaults of `berth bench`: boot time 60s,
// listing lag 10s, one slot per instance, max_instances 10, idle_count 0
// with idle_time 20m, on-demand, acquire timeout 15m.
func DefaultConfig() Config {
	c := Config{
		Policy:     PolicyBerth,
		BootTime:   60 * time.Second,
		ListingLag: 10 * time.Second,
		IdleTime:   20 * time.Minute,
	}
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	if c.Policy == "" {
		c.Policy = PolicyBerth
	}
	if c.CapacityPerInstance < 1 {
		c.CapacityPerInstance = 1
	}
	if c.MaxInstances < 1 {
		c.MaxInstances = 10
	}
	if c.AcquireTimeout <= 0 {
		c.AcquireTimeout = 15 * time.Minute
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 5 * time.Second
	}
	if c.TickInterval <= 0 {
		c.TickInterval = 5 * time.Second
	}
	if c.CheckInterval <= 0 {
		c.CheckInterval = 10 * time.Second
	}
	if c.SuspendedCost <= 0 {
		c.SuspendedCost = 0.1
	}
	if c.SampleEvery <= 0 {
		c.SampleEvery = time.Minute
	}
}

func (c *Config) validate() error {
	switch c.Policy {
	case PolicyBerth, PolicyNaiveIdle, PolicyLateAcquire:
	case PolicyWarmPool:
		if c.PoolSize < 1 {
			return errors.New("policy warm-pool needs --pool-size N (1 or more suspended instances)")
		}
	case PolicyScheduled:
		if len(c.Schedule) == 0 {
			return errors.New(`policy scheduled needs --schedule "CRON=N" at least once, e.g. --schedule "* 9-17 * * 1-5=40"`)
		}
		if _, err := policy.NewSchedule(c.Schedule); err != nil {
			return fmt.Errorf("--schedule: %w", err)
		}
	case PolicyStatic:
		if c.StaticInstances < 1 {
			return errors.New("policy static needs --static-instances N (1 or more)")
		}
	default:
		return fmt.Errorf("unknown policy %q; choose one of %v", c.Policy, Policies)
	}
	if c.IdleCount < 0 || c.ScaleFactor < 0 || c.ScaleFactorLimit < 0 || c.IdleTime < 0 {
		return errors.New("idle count, idle time, scale factor and its limit must not be negative")
	}
	if c.BootTime < 0 || c.BootJitter < 0 || c.ListingLag < 0 || c.ResumeTime < 0 || c.SuspendTime < 0 || c.Warmup < 0 {
		return errors.New("boot time, boot jitter, listing lag, resume time, suspend time and warmup must not be negative")
	}
	if c.PoolSize < 0 {
		return errors.New("pool size must not be negative")
	}
	if c.SuspendedIdleTime < 0 || c.SuspendedIdleCount < 0 || c.TargetWait < 0 {
		return errors.New("suspended idle time, suspended idle count and target wait must not be negative")
	}
	if err := c.validatePolls(); err != nil {
		return err
	}
	if c.SuspendedCost > 1 {
		return fmt.Errorf("suspended cost %g is above 1; it is the cost of a suspended second relative to a running one", c.SuspendedCost)
	}
	return nil
}

// Result is what a replay measured. JSON names are those of `berth bench
// --json`; *_s fields are seconds.
type Result struct {
	// The run's parameters, for context.
	Policy              string  `json:"policy"`
	Trace               string  `json:"trace,omitempty"`
	FromS               float64 `json:"from_s"`
	Hours               float64 `json:"hours"`
	MaxDurationS        float64 `json:"max_duration_s"`
	BootTimeS           float64 `json:"boot_time_s"`
	BootJitterS         float64 `json:"boot_jitter_s"`
	ListingLagS         float64 `json:"listing_lag_s"`
	CapacityPerInstance int     `json:"capacity_per_instance"`
	MaxInstances        int     `json:"max_instances"`
	IdleCount           int     `json:"idle_count"`
	IdleTimeS           float64 `json:"idle_time_s"`
	ScaleFactor         float64 `json:"scale_factor"`
	ScaleFactorLimit    int     `json:"scale_factor_limit"`
	Preemptive          bool    `json:"preemptive"`
	StaticInstances     int     `json:"static_instances,omitempty"`
	PoolSize            int     `json:"pool_size,omitempty"`
	ResumeTimeS         float64 `json:"resume_time_s"`
	SuspendTimeS        float64 `json:"suspend_time_s"`
	WarmupS             float64 `json:"warmup_s"`
	SuspendedCost       float64 `json:"suspended_cost"`
	SuspendedIdleTimeS  float64 `json:"suspended_idle_time_s"`
	SuspendedIdleCount  int     `json:"suspended_idle_count"`
	TargetWaitS         float64 `json:"target_wait_s"`
	Timezone            string  `json:"timezone,omitempty"`
	AcquireTimeoutS     float64 `json:"acquire_timeout_s"`
	Seed                uint64  `json:"seed"`
	PollConcurrency     int     `json:"poll_concurrency,omitempty"`
	PollsAsDemand       bool    `json:"polls_as_demand,omitempty"`

	// Jobs is the number of jobs replayed; Completed ran to the end.
	Jobs      int `json:"jobs"`
	Completed int `json:"completed"`
	// FailedCapacity counts jobs that failed because of capacity
	// accounting: taken without a slot that then never came (docs/failures.md,
	// failure 1). berth must keep it at 0.
	FailedCapacity int `json:"failed_capacity"`
	// FailedProvider counts jobs that failed because the provider could
	// not deliver: instance lost, or never ready after provider errors.
	FailedProvider int `json:"failed_provider"`
	// Measured counts the jobs in the wait statistics: those that
	// started and arrived after the warmup.
	Measured int `json:"measured"`
	// Wait is start − arrival over the jobs that started after the warmup.
	WaitP50S float64 `json:"wait_p50_s"`
	WaitP95S float64 `json:"wait_p95_s"`
	WaitP99S float64 `json:"wait_p99_s"`
	WaitMaxS float64 `json:"wait_max_s"`
	// InstanceSeconds is what the simulated cloud billed, from each
	// Increase to each deletion, up to the end of the replay.
	InstanceSeconds float64 `json:"instance_seconds"`
	// SuspendedInstanceSeconds is the part of InstanceSeconds spent
	// suspended.
	SuspendedInstanceSeconds float64 `json:"suspended_instance_seconds"`
	// BusySlotSeconds is the total run time of jobs.
	BusySlotSeconds float64 `json:"busy_slot_seconds"`
	// Utilization is BusySlotSeconds / (cost × capacity), where cost counts
	// a running instance-second as 1 and a suspended one as SuspendedCost.
	Utilization float64 `json:"utilization"`
	// Boots counts instances created; Resumes counts suspended instances
	// resumed.
	Boots   int `json:"boots"`
	Resumes int `json:"resumes"`
	// PeakInstances is the most instances alive in the cloud at once,
	// including unlisted and deleting ones.
	PeakInstances int `json:"peak_instances"`
	// MaxInstancesExceeded counts sampled moments (one per event) with
	// more instances alive than MaxInstances.
	MaxInstancesExceeded int `json:"max_instances_exceeded"`
	InstancesCreated     int `json:"instances_created"`
	InstancesDeleted     int `json:"instances_deleted"`
	// ProviderCalls counts every call to the cloud (Update, Increase,
	// Decrease, ...).
	ProviderCalls int `json:"provider_calls"`
	// VirtualSeconds is how much simulated time the replay covered.
	VirtualSeconds float64 `json:"virtual_seconds"`
	// WallSeconds is how long the replay took for real.
	WallSeconds float64 `json:"wall_seconds"`
	// FailureReasons counts failed jobs by the message their executor
	// would have shown.
	FailureReasons map[string]int `json:"failure_reasons,omitempty"`

	// ClairvoyantUtilization and ClairvoyantBoots are the clairvoyant
	// reference's (ClairvoyantSchedule) on the same jobs and costs: the
	// physical limit. ClairvoyantRatio is Utilization over it, the share
	// of the limit this policy reaches.
	ClairvoyantUtilization float64 `json:"clairvoyant_utilization"`
	ClairvoyantBoots       int     `json:"clairvoyant_boots"`
	ClairvoyantRatio       float64 `json:"clairvoyant_ratio"`
}

// Run replays jobs (sorted by arrival) from start under cfg. The clock
// starts at start (use the window start from Window, or the first arrival)
// and the replay ends when the last job has finished.
func Run(jobs []Job, start time.Time, cfg Config) (Result, error) {
	wallStart := time.Now()
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	for i := 1; i < len(jobs); i++ {
		if jobs[i].Arrival.Before(jobs[i-1].Arrival) {
			return Result{}, fmt.Errorf("jobs must be sorted by arrival: job %d arrives before job %d", i, i-1)
		}
	}
	if len(jobs) > 0 && jobs[0].Arrival.Before(start) {
		start = jobs[0].Arrival
	}
	r := newRunner(jobs, start, cfg)
	var d driver
	switch cfg.Policy {
	case PolicyBerth:
		d = newCoreDriver(r, false)
	case PolicyLateAcquire:
		d = newCoreDriver(r, true)
	case PolicyNaiveIdle:
		d = newNaiveDriver(r)
	case PolicyStatic:
		d = newStaticDriver(r)
	case PolicyWarmPool, PolicyScheduled:
		d = newWarmPoolDriver(r)
	}
	if err := r.loop(d); err != nil {
		return Result{}, err
	}
	res := r.result()
	ref := ClairvoyantSchedule(jobs, cfg)
	res.ClairvoyantUtilization, res.ClairvoyantBoots = ref.Utilization, ref.Boots
	if ref.Utilization > 0 {
		res.ClairvoyantRatio = res.Utilization / ref.Utilization
	}
	res.WallSeconds = time.Since(wallStart).Seconds()
	return res, nil
}

// driver is one policy's way of handing slots to jobs.
type driver interface {
	// start runs at the first instant, before any job arrives.
	start() error
	// nextTimer is the driver's next own event (poll, tick, check,
	// timeout); the zero time when it has none.
	nextTimer() time.Time
	// release gives back the slot of job j, which just finished.
	release(j int) error
	// step handles everything due at the runner's clock and hands slots to
	// queued jobs.
	step() error
}

type jobStatus uint8

const (
	stFuture  jobStatus = iota // not arrived
	stQueued                   // in the runner's FIFO queue
	stTaken                    // late-acquire: taken after a capacity check, not booked
	stBooked                   // booked, waiting for its instance
	stRunning                  // running on a slot
	stDone                     // ran to the end
	stFailed                   // failed
)

// runner holds what every policy shares: the clock, the cloud, the jobs
// and the measurements.
type runner struct {
	cfg   Config
	ctx   context.Context
	now   time.Time
	start time.Time
	cloud *sim.Group
	jobs  []Job

	status []jobStatus
	began  []time.Time // start of run
	next   int         // next job to arrive
	queue  fifo        // arrived, not yet given to the policy
	ends   endHeap     // running jobs by end time
	left   int         // jobs not finished

	waits          []float64
	busy           time.Duration
	completed      int
	failedCapacity int
	failedProvider int
	reasons        map[string]int
	peak           int
	exceeded       int

	nextSample time.Time
	waitSince  float64 // longest wait since the last Sample
}

func newRunner(jobs []Job, start time.Time, cfg Config) *runner {
	r := &runner{
		cfg:     cfg,
		ctx:     context.Background(),
		now:     start,
		start:   start,
		jobs:    jobs,
		status:  make([]jobStatus, len(jobs)),
		began:   make([]time.Time, len(jobs)),
		left:    len(jobs),
		waits:   make([]float64, 0, len(jobs)),
		reasons: map[string]int{},
	}
	cc := cfg.Cloud
	cc.BootTime, cc.BootJitter, cc.ListingLag, cc.Seed = cfg.BootTime, cfg.BootJitter, cfg.ListingLag, cfg.Seed
	// Every policy sees a cloud that can suspend; only berth's tier uses it.
	cc.SupportsSuspend, cc.ResumeLatency, cc.SuspendLatency = true, cfg.ResumeTime, cfg.SuspendTime
	r.cloud = sim.New(cc, func() time.Time { return r.now })
	return r
}

// loop is the discrete-event loop: jump to the earliest event, apply
// completions, then arrivals, then the driver's own work, then sample.
func (r *runner) loop(d driver) error {
	if err := d.start(); err != nil {
		return err
	}
	r.sample()
	// A replay that makes no progress for this long is stuck (a policy
	// that can never give a slot); better an error than an endless loop.
	const stuckAfter = 30 * 24 * time.Hour
	lastProgress := r.now
	iter := 0
	for r.left > 0 {
		t := time.Time{}
		consider := func(c time.Time) {
			if !c.IsZero() && (t.IsZero() || c.Before(t)) {
				t = c
			}
		}
		if r.next < len(r.jobs) {
			consider(r.jobs[r.next].Arrival)
		}
		if len(r.ends) > 0 {
			consider(r.ends[0].at)
		}
		consider(r.cloud.NextEventTime())
		consider(d.nextTimer())
		if t.IsZero() {
			return fmt.Errorf("replay stuck at %s: %d jobs left and nothing scheduled (policy %s)", r.now.Format(time.RFC3339), r.left, r.cfg.Policy)
		}
		if t.After(r.now) {
			r.now = t
		}
		left := r.left
		for len(r.ends) > 0 && !r.ends[0].at.After(r.now) {
			j := r.ends.pop().job
			if r.status[j] != stRunning {
				continue // lost while running; already counted
			}
			r.status[j] = stDone
			r.completed++
			r.left--
			r.busy += r.jobs[j].Duration
			if err := d.release(j); err != nil {
				return err
			}
		}
		for r.next < len(r.jobs) && !r.jobs[r.next].Arrival.After(r.now) {
			r.status[r.next] = stQueued
			r.queue.push(r.next)
			r.next++
		}
		if err := d.step(); err != nil {
			return err
		}
		r.sample()
		if r.left != left || r.queue.len() == 0 {
			lastProgress = r.now
		} else if r.now.Sub(lastProgress) > stuckAfter {
			return fmt.Errorf("replay stuck at %s: %d jobs left and none finished for %s (policy %s)", r.now.Format(time.RFC3339), r.left, stuckAfter, r.cfg.Policy)
		}
		iter++
		if r.cfg.Progress != nil && iter%4096 == 0 {
			r.cfg.Progress(len(r.jobs)-r.left, len(r.jobs))
		}
	}
	if r.cfg.Progress != nil {
		r.cfg.Progress(len(r.jobs), len(r.jobs))
	}
	return nil
}

// sample records the cloud's size at this event (I3, docs/invariants.md),
// and hands the timeline its samples up to now: the state is constant
// between events.
func (r *runner) sample() {
	live := r.cloud.Live()
	r.peak = max(r.peak, live)
	if live > r.cfg.MaxInstances {
		r.exceeded++
	}
	if r.cfg.Timeline == nil {
		return
	}
	if r.nextSample.IsZero() {
		r.nextSample = r.start
	}
	for !r.nextSample.After(r.now) {
		sm := Sample{At: r.nextSample, Demand: r.next - r.completed - r.failedCapacity - r.failedProvider,
			Busy: len(r.ends), MaxWait: r.waitSince}
		for _, in := range r.cloud.Instances() {
			switch in.State {
			case provider.StateCreating:
				sm.Booting++
			case provider.StateSuspended, provider.StateSuspending:
				sm.Suspended++
			case provider.StateRunning, provider.StateResuming:
				sm.Running++
			}
		}
		r.cfg.Timeline(sm)
		r.waitSince = 0
		r.nextSample = r.nextSample.Add(r.cfg.SampleEvery)
	}
}

// run starts job j on a slot now.
func (r *runner) run(j int) {
	r.status[j] = stRunning
	r.began[j] = r.now
	wait := r.now.Sub(r.jobs[j].Arrival)
	w := wait.Seconds()
	measured := r.jobs[j].Arrival.Sub(r.start) >= r.cfg.Warmup
	if measured {
		r.waits = append(r.waits, w)
	}
	if r.cfg.JobStarted != nil {
		r.cfg.JobStarted(j, wait, measured)
	}
	r.waitSince = max(r.waitSince, w)
	r.ends.push(endAt{at: r.now.Add(r.jobs[j].Duration), job: j})
}

// fail ends job j with a failure. capacity says whose fault it was.
func (r *runner) fail(j int, capacity bool, reason string) {
	if r.status[j] == stRunning {
		r.busy += r.now.Sub(r.began[j]) // it ran until its instance went
	}
	r.status[j] = stFailed
	r.left--
	if capacity {
		r.failedCapacity++
	} else {
		r.failedProvider++
	}
	r.reasons[reason]++
}

func (r *runner) result() Result {
	c := r.cfg
	res := Result{
		Policy:              c.Policy,
		BootTimeS:           c.BootTime.Seconds(),
		BootJitterS:         c.BootJitter.Seconds(),
		ListingLagS:         c.ListingLag.Seconds(),
		CapacityPerInstance: c.CapacityPerInstance,
		MaxInstances:        c.MaxInstances,
		IdleCount:           c.IdleCount,
		IdleTimeS:           c.IdleTime.Seconds(),
		ScaleFactor:         c.ScaleFactor,
		ScaleFactorLimit:    c.ScaleFactorLimit,
		Preemptive:          c.Preemptive,
		ResumeTimeS:         c.ResumeTime.Seconds(),
		SuspendTimeS:        c.SuspendTime.Seconds(),
		WarmupS:             c.Warmup.Seconds(),
		SuspendedCost:       c.SuspendedCost,
		SuspendedIdleTimeS:  c.SuspendedIdleTime.Seconds(),
		SuspendedIdleCount:  c.SuspendedIdleCount,
		TargetWaitS:         c.TargetWait.Seconds(),
		Timezone:            zoneText(c.Timezone),
		AcquireTimeoutS:     c.AcquireTimeout.Seconds(),
		Seed:                c.Seed,
		PollConcurrency:     c.PollConcurrency,
		PollsAsDemand:       c.PollsAsDemand,

		Jobs:                 len(r.jobs),
		Completed:            r.completed,
		FailedCapacity:       r.failedCapacity,
		FailedProvider:       r.failedProvider,
		BusySlotSeconds:      r.busy.Seconds(),
		PeakInstances:        r.peak,
		MaxInstancesExceeded: r.exceeded,
		VirtualSeconds:       r.now.Sub(r.start).Seconds(),
	}
	if c.Policy == PolicyStatic {
		res.StaticInstances = c.StaticInstances
	}
	if c.Policy == PolicyWarmPool {
		res.PoolSize = c.PoolSize
	}
	res.Measured = len(r.waits)
	sort.Float64s(r.waits)
	res.WaitP50S = percentile(r.waits, 50)
	res.WaitP95S = percentile(r.waits, 95)
	res.WaitP99S = percentile(r.waits, 99)
	if n := len(r.waits); n > 0 {
		res.WaitMaxS = r.waits[n-1]
	}
	st := r.cloud.Stats()
	res.InstanceSeconds = r.cloud.BilledSeconds(r.now)
	res.SuspendedInstanceSeconds = r.cloud.SuspendedSeconds(r.now)
	res.Boots = st.Created
	res.Resumes = st.Calls.Resume
	res.InstancesCreated = st.Created
	res.InstancesDeleted = st.Deleted
	res.PeakInstances = max(res.PeakInstances, st.Peak)
	k := st.Calls
	res.ProviderCalls = k.Increase + k.Decrease + k.Update + k.Suspend + k.Resume + k.Heartbeat + k.ConnectInfo
	cost := res.InstanceSeconds - res.SuspendedInstanceSeconds + c.SuspendedCost*res.SuspendedInstanceSeconds
	if cost > 0 {
		res.Utilization = res.BusySlotSeconds / (cost * float64(c.CapacityPerInstance))
	}
	if len(r.reasons) > 0 {
		res.FailureReasons = r.reasons
	}
	return res
}

// zoneText names a replay's time zone, empty for UTC.
func zoneText(z *time.Location) string {
	if z == nil || z.String() == "UTC" {
		return ""
	}
	return z.String()
}

// percentile is the nearest-rank percentile of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// fifo is a queue of job indices.
type fifo struct {
	items []int
	head  int
}

func (q *fifo) push(j int) { q.items = append(q.items, j) }
func (q *fifo) len() int   { return len(q.items) - q.head }
func (q *fifo) peek() int  { return q.items[q.head] }

func (q *fifo) pop() int {
	j := q.items[q.head]
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	} else if q.head > 4096 && q.head*2 > len(q.items) {
		q.items = append(q.items[:0], q.items[q.head:]...)
		q.head = 0
	}
	return j
}

// endAt is a running job's end.
type endAt struct {
	at  time.Time
	job int
}

// endHeap is a min-heap (container/heap) of job ends; ties end in job
// order, so replays are deterministic.
type endHeap []endAt

func (h endHeap) Len() int      { return len(h) }
func (h endHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h endHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].job < h[j].job
	}
	return h[i].at.Before(h[j].at)
}

// Push and Pop are for container/heap; use push and pop.
func (h *endHeap) Push(x any) { *h = append(*h, x.(endAt)) }
func (h *endHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (h *endHeap) push(e endAt) { heap.Push(h, e) }
func (h *endHeap) pop() endAt   { return heap.Pop(h).(endAt) }
