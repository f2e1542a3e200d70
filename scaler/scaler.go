package scaler

import (
	"time"

	"golang.org/x/time/rate"

	"github.com/berth-ci/berth/policy"
)

type Policies interface {
	At(t time.Time) policy.Policy
}

type FixedPolicy policy.Policy

func (p FixedPolicy) At(time.Time) policy.Policy { return policy.Policy(p) }

type Config struct {
	// CapacityPerInstance is the number of slots on each instance (default 1).
	CapacityPerInstance int
	// MaxInstances bounds all instances together, suspended ones too (default 10).
	MaxInstances int
	// MaxUseCount drains an instance after this many jobs; 0 means no limit.
	MaxUseCount int
	// Policies gives the idle pool policy over time (default: idle_count 1,
	// idle_time 20m, preemptive).
	Policies Policies
	// ThrottleLimit is instances per second that may be requested (default 100);
	// ThrottleBurst is the bucket size (default 10).
	ThrottleLimit float64
	ThrottleBurst int
	// ReadyHook makes a newly running instance wait for RunReadyHook to succeed.
	ReadyHook bool
	// ReadyTimeout bounds how long an instance may take from request to ready (default 15m).
	ReadyTimeout time.Duration
	// ListingTimeout bounds how long a requested instance may stay missing
	// from the provider's listing before the request is written off (default 15m).
	ListingTimeout time.Duration
	// HeartbeatInterval is how often idle ready instances are checked; 0 disables.
	HeartbeatInterval time.Duration
	// FailureThreshold is how many consecutive heartbeat, hook or suspend
	// failures remove an instance (default 3).
	FailureThreshold int
	// CanSuspend reports that the provider has the suspend capability.
	CanSuspend bool
	// EnvTTL is how long a suspended environment is kept (default 7 days).
	EnvTTL time.Duration
	// MaxClockStep bounds how far one Advance moves the clock that parked
	// environments age by; 0 means no bound. The daemon advances every few
	// seconds, so a longer step is the wall clock jumping (NTP, a VM
	// restored): without the bound one jump would expire every parked
	// environment at once (issue 19). See clockjump.go.
	MaxClockStep time.Duration
	// EnvEvictAfter lets RelieveParked evict the oldest parked environment
	// parked at least this long when parked environments hold every
	// instance (see parked.go); 0 never evicts.
	EnvEvictAfter time.Duration
	// DeleteUnknown deletes instances the provider lists but berth does not
	// know, instead of adopting them.
	DeleteUnknown bool
	// ResetAdopted holds an instance the provider lists running that
	// berth has no record of (a previous process's, or one a lost store
	// forgot) until the caller reset it (RunReadyHook with Reset): a job
	// berth does not know may have left its files there, and the next job
	// must not see them. Set it when the provider can reset an instance.
	ResetAdopted bool
	// Disposable says the provider's instances may be deleted and replaced
	// at will (provider.Capabilities.Disposable). Without ResetAdopted, an
	// instance listed running that berth has no record of is then deleted
	// (reason replaced_unknown) and demand boots a fresh one, instead of
	// being adopted with what an unknown job left there (see unknown.go).
	Disposable bool
	// DeleteOnDeadJob deletes, on restart, instances whose job died with the
	// previous process instead of releasing their slots.
	DeleteOnDeadJob bool
	// ConfirmConnect says the caller reports, with Connected, when a job
	// has its instance's connection details and starts there. Until then
	// an acquisition whose instance goes (the provider lists it deleting,
	// a heartbeat fails) is moved to another slot rather than lost: its
	// job ran nothing yet (issue 43: a job booked on an instance the
	// cloud was terminating failed). See connect.go.
	ConfirmConnect bool
	// SuspendedCost is what a suspended second costs relative to a running
	// one (default 0.1); target_wait sizing prefers the suspended tier only
	// while it is cheaper than hot capacity.
	SuspendedCost float64
	// BootTimeEstimate and ResumeTimeEstimate are what target_wait sizing
	// assumes before it has measured a boot or a resume (defaults 60s and
	// 10s); after that it uses what it measured.
	BootTimeEstimate   time.Duration
	ResumeTimeEstimate time.Duration
	// ProfileZone is the time zone target_wait's arrival profile counts
	// its slots of the day and the week in (nil: UTC): the policy's
	// timezone, so that a team's 9:00 keeps its slot across a daylight-
	// saving change instead of being relearned an hour away.
	ProfileZone *time.Location
}

func (c *Config) setDefaults() {
	if c.CapacityPerInstance < 1 {
		c.CapacityPerInstance = 1
	}
	if c.MaxInstances < 1 {
		c.MaxInstances = 10
	}
	if c.Policies == nil {
		c.Policies = FixedPolicy{IdleCount: 1, IdleTime: 20 * time.Minute, Preemptive: true}
	}
	if c.ThrottleLimit <= 0 {
		c.ThrottleLimit = 100
	}
	if c.ThrottleBurst < 1 {
		c.ThrottleBurst = 10
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = 15 * time.Minute
	}
	if c.ListingTimeout <= 0 {
		c.ListingTimeout = 15 * time.Minute
	}
	if c.FailureThreshold < 1 {
		c.FailureThreshold = 3
	}
	if c.EnvTTL <= 0 {
		c.EnvTTL = 7 * 24 * time.Hour
	}
	if c.SuspendedCost <= 0 {
		c.SuspendedCost = 0.1
	}
	if c.BootTimeEstimate <= 0 {
		c.BootTimeEstimate = 60 * time.Second
	}
	if c.ResumeTimeEstimate <= 0 {
		c.ResumeTimeEstimate = 10 * time.Second
	}
}

type Scaler struct {
	cfg Config
	now time.Time
	// clockJumps counts steps longer than cfg.MaxClockStep (clockjump.go).
	clockJumps int

	// held pauses the idle pool (Hold): an operator stopped the fleet at
	// zero and berth keeps it there until released or stopped.
	held bool

	instances map[string]*instance
	byPhase   [numPhases]int
	res       map[string]*reservation
	queue     []*reservation // unbound reservations, FIFO
	qhead     int
	free      []*instance // ready instances with a free slot
	envs      map[string]*env
	pending   []time.Time // requested, not yet listed: request times, oldest first
	// restoredPending is how many of pending (the oldest) were restored
	// from the store; restoredSince the first listing after the restore
	// (phantom.go).
	restoredPending int
	restoredSince   time.Time

	// offCurrentUsed counts reservations on instances that are not "current"
	// (draining, suspend_wait), which must not count as demand for new instances.
	offCurrentUsed int
	acquired       int

	throttle    *rate.Limiter
	hookBackoff time.Duration // pause for scale-up after a hook-failure deletion
	hookPauseTo time.Time
	lastIncErr  string

	// The suspended idle tier (tier.go): pool holds pooled instances that
	// are suspended and so can be resumed now; pooled counts pooled
	// instances in any phase (suspending too).
	pool   []*instance
	pooled int
	// queued is the demand the job source knows and no booking covers yet
	// (Queued).
	queued int
	// arr is the learned arrival pattern; sized the pool sizes chosen from
	// it for target_wait; bootEst and resumeEst what boots and resumes took.
	arr *arrivals
	// runs is how long jobs ran, learned from releases (returns.go),
	// persisted with the rest of Learned (learned.go).
	runs      durations
	sized     Sized
	bootEst   time.Duration
	resumeEst time.Duration
	bootSeen  bool
	resSeen   bool
	// learned is the last snapshot of the learned state for State, taken
	// at learnedAt when learnGen was learnedGen; learnedTimes counts the
	// boot and resume times learned (learned.go).
	learned      *Learned
	learnedAt    time.Time
	learnedGen   int
	learnedTimes int

	// sorted caches the instances by ID while sortedOK (sortedInstances).
	sorted   []*instance
	sortedOK bool

	actions []Action
	dirty   bool
	refused map[string]int
	granted int  // reservations granted since start, for metrics
	stopped bool // Shutdown was called: no more scale-up (shutdown.go)
	// polls holds the bookings of long-polls in flight (poll.go): capacity
	// a job may need, never demand.
	polls map[string]bool
}

// New returns a core with no instances, at time now.
func New(cfg Config, now time.Time) *Scaler {
	cfg.setDefaults()
	return &Scaler{
		cfg:       cfg,
		now:       now,
		instances: map[string]*instance{},
		res:       map[string]*reservation{},
		polls:     map[string]bool{},
		envs:      map[string]*env{},
		throttle:  rate.NewLimiter(rate.Limit(cfg.ThrottleLimit), cfg.ThrottleBurst),
		refused:   map[string]int{},
		arr:       newArrivals(cfg.ProfileZone),
		bootEst:   cfg.BootTimeEstimate,
		resumeEst: cfg.ResumeTimeEstimate,
	}
}

func (s *Scaler) Config() Config { return s.cfg }

func (s *Scaler) Now() time.Time { return s.now }

func (s *Scaler) Advance(now time.Time) {
	if now.After(s.now) {
		s.boundClockStep(now.Sub(s.now))
		s.now = now
	}
}

func (s *Scaler) Ready() (actions []Action, dirty bool) {
	actions, dirty = s.actions, s.dirty
	s.actions, s.dirty = nil, false
	return actions, dirty
}

func (s *Scaler) HasReady() bool { return len(s.actions) > 0 || s.dirty }

func (s *Scaler) emit(a Action) { s.actions = append(s.actions, a) }

// policy is the idle pool policy now: the schedule's, or none while held.
func (s *Scaler) policy() policy.Policy {
	p := s.cfg.Policies.At(s.now)
	if s.held {
		p = heldPolicy(p)
	}
	return p
}
