// Package scaler is berth's deterministic core: booking, scaling policy,
// instance lifecycle and restart reconciliation.
//
// It is a state machine in the style of etcd's raft package. Callers feed it
// events (a reservation, a provider listing, the result of a provider call, a
// clock tick) and carry out the actions that Ready returns. There is no I/O,
// no goroutine and no wall clock inside: the caller sets the time with
// Advance. One goroutine (or one lock) must own a Scaler; that single owner is
// what gives every decision one consistent snapshot (DESIGN.md, failure 2).
package scaler

import (
	"fmt"
	"math"
	"sort"
	"time"

	"golang.org/x/time/rate"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
)

// Policies yields the scaling policy in force at an instant. *policy.Schedule
// implements it.
type Policies interface {
	At(t time.Time) policy.Policy
}

// FixedPolicy is a Policies that always returns the same policy.
type FixedPolicy policy.Policy

// At returns p.
func (p FixedPolicy) At(time.Time) policy.Policy { return policy.Policy(p) }

// Config holds the core's settings. Zero values get the defaults noted.
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
	// EnvEvictAfter lets RelieveParked evict the oldest parked environment
	// parked at least this long when parked environments hold every
	// instance (see parked.go); 0 never evicts.
	EnvEvictAfter time.Duration
	// DeleteUnknown deletes instances the provider lists but berth does not
	// know, instead of adopting them.
	DeleteUnknown bool
	// DeleteOnDeadJob deletes, on restart, instances whose job died with the
	// previous process instead of releasing their slots.
	DeleteOnDeadJob bool
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
}

// phase is the core's view of an instance, finer than the provider's state.
type phase uint8

const (
	phaseCreating    phase = iota // requested or listed creating
	phaseBooting                  // provider says running; ready hook pending
	phaseReady                    // takes bookings
	phaseDraining                 // takes no bookings; deleted when its slots are free
	phaseDeleting                 // Decrease issued
	phaseSuspendWait              // an environment is parked; other slots finishing
	phaseSuspending               // Suspend issued
	phaseSuspended                // provider says suspended
	phaseResuming                 // Resume issued
	phaseRestored                 // loaded from the store; the next listing decides
	numPhases
)

var phaseNames = [numPhases]string{"creating", "booting", "ready", "draining", "deleting",
	"suspend_wait", "suspending", "suspended", "resuming", "restored"}

func (p phase) String() string { return phaseNames[p] }

// current reports whether the phase counts as a running (or soon running)
// instance for the scaling decision.
func (p phase) current() bool {
	return p == phaseCreating || p == phaseBooting || p == phaseReady || p == phaseResuming
}

// holdsEnv reports whether the phase belongs to a parked environment.
func (p phase) holdsEnv() bool {
	return p == phaseSuspendWait || p == phaseSuspending || p == phaseSuspended
}

type instance struct {
	id        string
	phase     phase
	slots     []*reservation // nil = free
	used      int            // slots held by reservations
	env       *env           // environment parked on (or resumed from) this instance
	useCount  int
	created   time.Time
	readyAt   time.Time
	idleSince time.Time // last moment used became 0
	freeIdx   int       // position in Scaler.free, -1 if absent

	provState    provider.State
	restoredFrom phase // phase recorded in the store, for phaseRestored

	hookFails   int
	nextHook    time.Time
	hookPending bool
	lastErr     string

	hbFails    int
	nextHB     time.Time
	hbInFlight bool

	suspendFails int
	nextSuspend  time.Time

	deleteReason Reason
	nextDecrease time.Time
	unclaimedAt  time.Time // first seen suspended without environment
}

func (in *instance) freeSlots() int {
	n := len(in.slots) - in.used
	if in.env != nil && in.slots[in.env.slot] == nil {
		n-- // the parked environment holds its slot
	}
	return n
}

type reservation struct {
	key      string
	inst     *instance // nil while unbound
	slot     int
	acquired bool
	waiting  bool // an Acquire or Resume waits for Bound/Failed
	queued   bool // in Scaler.queue
	env      *env // set when the reservation resumes an environment
	lost     string
}

type env struct {
	key      string
	inst     *instance
	instID   string
	slot     int
	state    []byte
	parkedAt time.Time
	inUse    *reservation // the job that resumed it
	lost     string       // why its instance is gone
}

// Scaler is the core state machine. It is not safe for concurrent use.
type Scaler struct {
	cfg Config
	now time.Time

	instances map[string]*instance
	byPhase   [numPhases]int
	res       map[string]*reservation
	queue     []*reservation // unbound reservations, FIFO
	qhead     int
	free      []*instance // ready instances with a free slot
	envs      map[string]*env
	pending   []time.Time // requested, not yet listed: request times, oldest first

	// offCurrentUsed counts reservations on instances that are not "current"
	// (draining, suspend_wait), which must not count as demand for new instances.
	offCurrentUsed int
	acquired       int

	throttle    *rate.Limiter
	hookBackoff time.Duration // pause for scale-up after a hook-failure deletion
	hookPauseTo time.Time
	lastIncErr  string

	actions []Action
	dirty   bool
	refused map[string]int
	granted int  // reservations granted since start, for metrics
	stopped bool // Shutdown was called: no more scale-up (shutdown.go)
}

// New returns a core with no instances, at time now.
func New(cfg Config, now time.Time) *Scaler {
	cfg.setDefaults()
	return &Scaler{
		cfg:       cfg,
		now:       now,
		instances: map[string]*instance{},
		res:       map[string]*reservation{},
		envs:      map[string]*env{},
		throttle:  rate.NewLimiter(rate.Limit(cfg.ThrottleLimit), cfg.ThrottleBurst),
		refused:   map[string]int{},
	}
}

// Config returns the configuration in force, defaults filled in.
func (s *Scaler) Config() Config { return s.cfg }

// Now returns the core's clock.
func (s *Scaler) Now() time.Time { return s.now }

// Advance moves the core's clock forward. It never moves backwards.
func (s *Scaler) Advance(now time.Time) {
	if now.After(s.now) {
		s.now = now
	}
}

// Ready returns the actions decided since the last call, and whether the
// durable state changed (the caller must persist State before carrying out
// provider actions, so intents are recorded before provider calls).
func (s *Scaler) Ready() (actions []Action, dirty bool) {
	actions, dirty = s.actions, s.dirty
	s.actions, s.dirty = nil, false
	return actions, dirty
}

// HasReady reports whether Ready would return anything.
func (s *Scaler) HasReady() bool { return len(s.actions) > 0 || s.dirty }

func (s *Scaler) emit(a Action) { s.actions = append(s.actions, a) }

func (s *Scaler) policy() policy.Policy { return s.cfg.Policies.At(s.now) }

// ---- bookkeeping helpers ------------------------------------------------------

func (s *Scaler) setPhase(in *instance, p phase) {
	if in.phase == p {
		return
	}
	wasCurrent := in.phase.current()
	s.byPhase[in.phase]--
	in.phase = p
	s.byPhase[p]++
	if wasCurrent != p.current() {
		if wasCurrent {
			s.offCurrentUsed += in.used
		} else {
			s.offCurrentUsed -= in.used
		}
	}
	s.updateFree(in)
	s.dirty = true
}

func (s *Scaler) updateFree(in *instance) {
	want := in.phase == phaseReady && in.freeSlots() > 0
	if want && in.freeIdx < 0 {
		in.freeIdx = len(s.free)
		s.free = append(s.free, in)
	} else if !want && in.freeIdx >= 0 {
		last := s.free[len(s.free)-1]
		s.free[in.freeIdx] = last
		last.freeIdx = in.freeIdx
		s.free = s.free[:len(s.free)-1]
		in.freeIdx = -1
	}
}

func (s *Scaler) addInstance(id string, p phase) *instance {
	in := &instance{id: id, phase: p, slots: make([]*reservation, s.cfg.CapacityPerInstance),
		created: s.now, idleSince: s.now, freeIdx: -1}
	s.instances[id] = in
	s.byPhase[p]++
	s.updateFree(in)
	s.dirty = true
	return in
}

func (s *Scaler) removeInstance(in *instance, reason Reason) {
	s.setPhase(in, phaseDeleting) // leaves the free list and the counts of current
	s.byPhase[phaseDeleting]--
	delete(s.instances, in.id)
	s.emit(Gone{ID: in.id, Reason: reason, Lifetime: s.now.Sub(in.created)})
	s.dirty = true
}

// bind puts r on a free slot of in.
func (s *Scaler) bind(r *reservation, in *instance) {
	for i, h := range in.slots {
		if h == nil && !(in.env != nil && in.env.slot == i) {
			in.slots[i] = r
			r.inst, r.slot = in, i
			in.used++
			if !in.phase.current() {
				s.offCurrentUsed++
			}
			s.updateFree(in)
			return
		}
	}
	panic("scaler: bind on a full instance " + in.id)
}

// unbind frees r's slot.
func (s *Scaler) unbind(r *reservation) {
	in := r.inst
	if in.slots[r.slot] != r {
		// A resume that has not completed holds no slot yet.
		r.inst = nil
		return
	}
	in.slots[r.slot] = nil
	in.used--
	if !in.phase.current() {
		s.offCurrentUsed--
	}
	if r.acquired {
		s.acquired--
	}
	r.inst, r.acquired = nil, false
	if in.used == 0 {
		in.idleSince = s.now
	}
	s.updateFree(in)
}

// bindQueued gives free slots to unbound reservations, oldest first.
func (s *Scaler) bindQueued() {
	for s.qhead < len(s.queue) && len(s.free) > 0 {
		r := s.queue[s.qhead]
		s.queue[s.qhead] = nil
		s.qhead++
		if !r.queued {
			continue
		}
		r.queued = false
		s.bind(r, s.free[len(s.free)-1])
		if r.waiting {
			r.waiting = false
			r.acquired = true
			s.acquired++
			s.emit(Bound{Key: r.key, InstanceID: r.inst.id})
		}
	}
	if s.qhead == len(s.queue) {
		s.queue, s.qhead = s.queue[:0], 0
	} else if s.qhead > 1024 && s.qhead*2 > len(s.queue) {
		s.queue = append(s.queue[:0], s.queue[s.qhead:]...)
		s.qhead = 0
	}
}

func (s *Scaler) enqueue(r *reservation, front bool) {
	r.queued = true
	if front && s.qhead > 0 {
		s.qhead--
		s.queue[s.qhead] = r
		return
	}
	if front {
		s.queue = append([]*reservation{r}, s.queue[s.qhead:]...)
		s.qhead = 0
		return
	}
	s.queue = append(s.queue, r)
}

// ---- booking ------------------------------------------------------------------

// InUse returns reserved + acquired slots, the demand that needs running instances.
func (s *Scaler) InUse() int { return len(s.res) }

func (s *Scaler) heldInstances() int {
	return s.byPhase[phaseSuspendWait] + s.byPhase[phaseSuspending] + s.byPhase[phaseSuspended]
}

// Reserve books a slot for key. It fails with a *NoCapacityError when no slot
// can be guaranteed; the caller must then not take a job.
func (s *Scaler) Reserve(key string) error {
	if _, dup := s.res[key]; dup {
		return fmt.Errorf("reserve %q: %w", key, ErrDuplicateKey)
	}
	p := s.policy()
	if p.Preemptive {
		if len(s.free) == 0 {
			s.refused["no_idle_slot"]++
			return &NoCapacityError{Reason: "no_idle_slot", Detail: fmt.Sprintf(
				"preemptive mode books only idle slots on ready instances; in_use=%d ready=%d", len(s.res), s.byPhase[phaseReady])}
		}
	} else {
		limit := (s.cfg.MaxInstances - s.heldInstances()) * s.cfg.CapacityPerInstance
		if len(s.res) >= limit {
			s.refused["max_instances"]++
			return &NoCapacityError{Reason: "max_instances", Detail: fmt.Sprintf(
				"in_use=%d limit=%d (max_instances=%d suspended=%d capacity_per_instance=%d)",
				len(s.res), limit, s.cfg.MaxInstances, s.heldInstances(), s.cfg.CapacityPerInstance)}
		}
	}
	r := &reservation{key: key}
	s.res[key] = r
	s.granted++
	if len(s.free) > 0 {
		s.bind(r, s.free[len(s.free)-1])
	} else {
		s.enqueue(r, false)
	}
	// Taking an idle slot lowers the idle pool: refill it in the same decision.
	s.scaleUp()
	s.dirty = true
	return nil
}

// Unreserve gives a booking back: the job request returned nothing. The slot
// is idle again. It never creates or deletes an instance by itself.
func (s *Scaler) Unreserve(key string) error {
	r, ok := s.res[key]
	if !ok {
		return fmt.Errorf("unreserve %q: %w", key, ErrUnknownKey)
	}
	s.dropReservation(r)
	return nil
}

func (s *Scaler) dropReservation(r *reservation) {
	delete(s.res, r.key)
	r.queued = false
	if r.env != nil {
		r.env.inUse = nil
		r.env = nil
	}
	if r.inst != nil {
		in := r.inst
		s.unbind(r)
		s.afterSlotFreed(in)
	}
	s.dirty = true
}

// Acquire binds key's booking to a slot on a ready instance. When it returns
// ok=false, the booking waits for an instance that is booting for it; a Bound
// or Failed action for key follows later.
func (s *Scaler) Acquire(key string) (instanceID string, ok bool, err error) {
	r, found := s.res[key]
	if !found {
		return "", false, fmt.Errorf("acquire %q: %w", key, ErrUnknownKey)
	}
	if r.inst != nil && (r.env == nil || r.inst.phase == phaseReady) {
		if !r.acquired {
			r.acquired = true
			s.acquired++
			s.dirty = true
		}
		return r.inst.id, true, nil
	}
	r.waiting = true
	return "", false, nil
}

// Why explains why key's booking has no ready slot yet, for the error a user
// sees when an Acquire times out.
func (s *Scaler) Why(key string) string {
	r, ok := s.res[key]
	if !ok {
		return "the booking no longer exists"
	}
	var why string
	switch {
	case r.lost != "":
		why = r.lost
	case s.lastIncErr != "":
		why = "the provider failed to create instances: " + s.lastIncErr
	default:
		why = fmt.Sprintf("no instance became ready (creating=%d booting=%d pending=%d max_instances=%d)",
			s.byPhase[phaseCreating], s.byPhase[phaseBooting], len(s.pending), s.cfg.MaxInstances)
	}
	return why
}

// Release ends key's acquisition: the slot is idle again and the instance's
// use count goes up; at max_use_count the instance drains.
func (s *Scaler) Release(key string) error {
	r, ok := s.res[key]
	if !ok {
		return fmt.Errorf("release %q: %w", key, ErrUnknownKey)
	}
	if r.env != nil {
		// The resumed environment was used and given back: it is consumed.
		e := r.env
		e.inst.env = nil
		delete(s.envs, e.key)
		r.env = nil
	}
	if in := r.inst; in != nil && r.acquired {
		in.useCount++
	}
	s.dropReservation(r)
	return nil
}

// afterSlotFreed decides what a freed slot means for its instance.
func (s *Scaler) afterSlotFreed(in *instance) {
	switch in.phase {
	case phaseReady:
		if s.cfg.MaxUseCount > 0 && in.useCount >= s.cfg.MaxUseCount {
			s.setPhase(in, phaseDraining)
			in.deleteReason = ReasonMaxUse
			// Bookings that have not started would push the instance past
			// max_use_count: move them to another slot or a new instance.
			s.parkOthers(in)
			s.bindQueued()
			s.scaleUp()
		} else {
			s.bindQueued()
		}
	case phaseSuspendWait:
		if in.used == 0 {
			s.issueSuspend(in)
		}
	}
	if in.phase == phaseDraining && in.used == 0 {
		s.deleteInstance(in, in.deleteReason)
	}
}

// ---- suspend and resume -------------------------------------------------------

// Suspend parks key's acquisition as environment envKey with its saved state.
// The instance takes no new bookings from now on, and is suspended once its
// other slots are free. The reservation for key ends.
func (s *Scaler) Suspend(key, envKey string, state []byte) error {
	r, ok := s.res[key]
	if !ok {
		return fmt.Errorf("suspend %q: %w", key, ErrUnknownKey)
	}
	if !r.acquired || r.inst == nil {
		return fmt.Errorf("suspend %q: %w", key, ErrNotAcquired)
	}
	if !s.cfg.CanSuspend {
		return fmt.Errorf("suspend %q: %w", key, ErrSuspendUnsupported)
	}
	if old, ok := s.envs[envKey]; ok && old != r.env {
		return fmt.Errorf("suspend %q: environment key %q is already in use", key, envKey)
	}
	in := r.inst
	if in.env != nil && in.env != r.env {
		// An instance is suspended whole and carries one environment; a
		// second Suspend would overwrite (and so lose) the first one.
		return fmt.Errorf("suspend %q: %w (environment %s)", key, ErrEnvSlotTaken, in.env.key)
	}
	slot := r.slot
	if r.env != nil {
		delete(s.envs, r.env.key)
		r.env = nil
		in.env = nil
	}
	in.useCount++
	delete(s.res, key)
	s.unbind(r)
	e := &env{key: envKey, inst: in, instID: in.id, slot: slot, state: state, parkedAt: s.now}
	in.env = e
	s.envs[envKey] = e
	s.parkOthers(in)
	s.setPhase(in, phaseSuspendWait)
	if in.used == 0 {
		s.issueSuspend(in)
	}
	s.scaleUp()
	s.dirty = true
	return nil
}

// parkOthers moves bookings that have not started off an instance that is
// about to be suspended.
func (s *Scaler) parkOthers(in *instance) {
	for _, o := range in.slots {
		if o != nil && !o.acquired {
			s.unbind(o)
			s.enqueue(o, true)
		}
	}
}

func (s *Scaler) issueSuspend(in *instance) {
	s.setPhase(in, phaseSuspending)
	in.nextSuspend = time.Time{}
	s.emit(Suspend{ID: in.id})
}

// SuspendResult reports the outcome of a Suspend action.
func (s *Scaler) SuspendResult(id string, err error) {
	in, ok := s.instances[id]
	if !ok || err == nil {
		return
	}
	in.suspendFails++
	in.lastErr = err.Error()
	if in.suspendFails >= s.cfg.FailureThreshold {
		s.failInstance(in, ReasonSuspendFailed, fmt.Sprintf("suspend failed %d times: %v", in.suspendFails, err))
		return
	}
	// Retry on a later tick.
	in.nextSuspend = s.now.Add(backoff(in.suspendFails))
}

// Resume resumes environment envKey for a new booking key. The result comes
// as a Bound (with the saved state) or Failed action for key. It fails at once
// when the environment is unknown or its instance is gone.
func (s *Scaler) Resume(envKey, key string) error {
	e, ok := s.envs[envKey]
	if !ok {
		return fmt.Errorf("resume %q: %w", envKey, ErrUnknownEnv)
	}
	if e.lost != "" {
		return &EnvLostError{Key: envKey, InstanceID: e.instID, Reason: e.lost}
	}
	if e.inUse != nil {
		return fmt.Errorf("resume %q: %w (job booking %s)", envKey, ErrEnvBusy, e.inUse.key)
	}
	if _, dup := s.res[key]; dup {
		return fmt.Errorf("resume %q as %q: %w", envKey, key, ErrDuplicateKey)
	}
	in := e.inst
	r := &reservation{key: key, inst: in, slot: e.slot, env: e, waiting: true}
	s.res[key] = r
	e.inUse = r
	if in.phase == phaseSuspended {
		s.setPhase(in, phaseResuming)
		s.emit(Resume{ID: in.id})
	}
	// In suspend_wait or suspending the resume is issued when the suspend
	// completes (see observeOne): a provider cannot do both at once.
	s.dirty = true
	return nil
}

// ResumeResult reports the outcome of a Resume action.
func (s *Scaler) ResumeResult(id string, err error) {
	in, ok := s.instances[id]
	if !ok || err == nil || in.phase != phaseResuming {
		return
	}
	in.lastErr = err.Error()
	s.setPhase(in, phaseSuspended)
	if e := in.env; e != nil && e.inUse != nil {
		r := e.inUse
		e.inUse = nil
		r.env = nil
		r.inst = nil
		delete(s.res, r.key)
		s.emit(Failed{Key: r.key, Err: fmt.Errorf("resume instance %s: %w", id, err)})
	}
}

// finishResume makes a resumed instance ready and hands the environment's
// slot to the job that resumed it.
func (s *Scaler) finishResume(in *instance) {
	e := in.env
	s.setPhase(in, phaseReady)
	in.readyAt = s.now
	if e == nil {
		s.bindQueued()
		return
	}
	if e.inUse == nil {
		// Nobody waits (the job died with a previous process): park it again.
		s.setPhase(in, phaseSuspendWait)
		s.issueSuspend(in)
		return
	}
	// The environment's slot now belongs to the job that resumed it; the
	// environment stays linked so that Release can consume it.
	r := e.inUse
	in.slots[e.slot] = r
	in.used++
	r.inst, r.slot = in, e.slot
	r.acquired, r.waiting = true, false
	s.acquired++
	s.updateFree(in)
	s.emit(Bound{Key: r.key, InstanceID: in.id, State: e.state})
	s.bindQueued()
}

// Environments returns the keys of parked environments, sorted.
func (s *Scaler) Environments() []string {
	keys := make([]string, 0, len(s.envs))
	for k := range s.envs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ---- provider feedback --------------------------------------------------------

// IncreaseResult reports how many of an Increase of requested instances the
// provider accepted.
func (s *Scaler) IncreaseResult(requested, created int, err error) {
	if created < requested {
		drop := requested - created
		if drop > len(s.pending) {
			drop = len(s.pending)
		}
		// Drop the newest requests: they are the ones this call made.
		s.pending = s.pending[:len(s.pending)-drop]
		s.dirty = true
	}
	if err != nil {
		s.lastIncErr = err.Error()
	} else {
		s.lastIncErr = ""
	}
}

// DecreaseResult reports which of the instances in a Decrease the provider accepted.
func (s *Scaler) DecreaseResult(ids []string, err error) {
	for _, id := range ids {
		if in, ok := s.instances[id]; ok && in.phase == phaseDeleting && err != nil {
			in.lastErr = err.Error()
			in.nextDecrease = s.now.Add(30 * time.Second)
		}
	}
}

// HookResult reports the outcome of RunReadyHook.
func (s *Scaler) HookResult(id string, err error) {
	in, ok := s.instances[id]
	if !ok || in.phase != phaseBooting {
		return
	}
	in.hookPending = false
	if err == nil {
		s.hookBackoff = 0
		s.makeReady(in)
		return
	}
	in.hookFails++
	in.lastErr = err.Error()
	if in.hookFails >= s.cfg.FailureThreshold {
		// Back off new instances too, so a broken hook does not churn the fleet.
		if s.hookBackoff == 0 {
			s.hookBackoff = 10 * time.Second
		} else if s.hookBackoff < 5*time.Minute {
			s.hookBackoff *= 2
		}
		s.hookPauseTo = s.now.Add(s.hookBackoff)
		s.failInstance(in, ReasonReadyHook, fmt.Sprintf("instance_ready_command failed %d times: %v", in.hookFails, err))
		return
	}
	in.nextHook = s.now.Add(backoff(in.hookFails))
}

// HeartbeatResult reports the outcome of a Heartbeat action.
func (s *Scaler) HeartbeatResult(id string, err error) {
	in, ok := s.instances[id]
	if !ok {
		return
	}
	in.hbInFlight = false
	if err == nil {
		in.hbFails = 0
		return
	}
	in.hbFails++
	in.lastErr = err.Error()
	if in.hbFails >= s.cfg.FailureThreshold && in.phase == phaseReady {
		s.failInstance(in, ReasonHeartbeat, fmt.Sprintf("heartbeat failed %d times: %v", in.hbFails, err))
	}
}

func backoff(fails int) time.Duration {
	d := time.Second << min(fails, 6)
	return min(d, time.Minute)
}

func (s *Scaler) makeReady(in *instance) {
	s.emit(InstanceReady{ID: in.id, After: s.now.Sub(in.created)})
	in.readyAt = s.now
	in.idleSince = s.now
	in.nextHB = s.now.Add(s.cfg.HeartbeatInterval)
	s.setPhase(in, phaseReady)
	s.bindQueued()
}

// failInstance deletes an instance that cannot serve, moving its bookings elsewhere.
func (s *Scaler) failInstance(in *instance, reason Reason, why string) {
	in.lastErr = why
	s.evict(in, fmt.Sprintf("instance %s: %s", in.id, why))
	s.deleteInstance(in, reason)
}

// evict moves an instance's bookings away: unstarted ones go back to the
// front of the queue, running ones are lost, a parked environment is lost.
func (s *Scaler) evict(in *instance, why string) {
	for _, r := range in.slots {
		if r == nil {
			continue
		}
		if r.acquired {
			s.unbind(r)
			delete(s.res, r.key)
			s.emit(Lost{Key: r.key, InstanceID: in.id, Reason: why})
			continue
		}
		s.unbind(r)
		r.lost = why
		s.enqueue(r, true)
	}
	if e := in.env; e != nil {
		if r := e.inUse; r != nil && s.res[r.key] == r {
			delete(s.res, r.key)
			s.emit(Failed{Key: r.key, Err: &InstanceLostError{InstanceID: in.id, Reason: why}})
		}
		e.inUse = nil
		e.lost = why
		e.inst = nil
		in.env = nil
	}
	s.dirty = true
}

func (s *Scaler) deleteInstance(in *instance, reason Reason) {
	if in.phase == phaseDeleting {
		return
	}
	in.deleteReason = reason
	in.nextDecrease = s.now.Add(30 * time.Second)
	s.setPhase(in, phaseDeleting)
	s.emit(Decrease{ID: in.id, Reason: reason})
}

// Listed is one instance in a provider listing.
type Listed struct {
	ID    string
	State provider.State
}

// Observe feeds the core a complete provider listing (the result of Update).
// The first listing after Restore reconciles the store with the provider.
func (s *Scaler) Observe(listing []Listed) {
	seen := make(map[string]struct{}, len(listing))
	var unknown []Listed
	for _, l := range listing {
		seen[l.ID] = struct{}{}
		in, ok := s.instances[l.ID]
		if !ok {
			unknown = append(unknown, l)
			continue
		}
		in.provState = l.State
		s.observeOne(in, l.State)
	}
	for _, in := range s.sortedInstances() {
		if _, ok := seen[in.id]; ok {
			continue
		}
		s.vanished(in)
	}
	for _, l := range unknown {
		s.adopt(l)
	}
	s.bindQueued()
	s.scaleUp()
}

// vanished handles an instance that the provider no longer lists.
func (s *Scaler) vanished(in *instance) {
	reason := in.deleteReason
	if in.phase != phaseDeleting {
		reason = ReasonRemovedByProvider
		why := fmt.Sprintf("instance %s is gone from the provider's listing (last state %q)", in.id, in.provState)
		if in.phase == phaseRestored {
			why = fmt.Sprintf("instance %s was removed while berth was not running", in.id)
		}
		s.evict(in, why)
	}
	s.removeInstance(in, reason)
}

func (s *Scaler) observeOne(in *instance, st provider.State) {
	if in.phase == phaseRestored {
		s.reconcile(in, st)
		return
	}
	switch st {
	case provider.StateDeleted:
		s.vanished(in)
	case provider.StateTimeout:
		if in.phase != phaseDeleting {
			s.failInstance(in, ReasonProviderTimeout, "the provider reported a timeout")
		}
	case provider.StateDeleting:
		if in.phase != phaseDeleting {
			s.evict(in, fmt.Sprintf("instance %s is being deleted by the provider", in.id))
			in.deleteReason = ReasonRemovedByProvider
			s.setPhase(in, phaseDeleting)
		}
	case provider.StateRunning:
		switch in.phase {
		case phaseCreating:
			s.setPhase(in, phaseBooting)
			if s.cfg.ReadyHook {
				in.hookPending = true
				s.emit(RunReadyHook{ID: in.id})
			} else {
				s.makeReady(in)
			}
		case phaseResuming:
			s.finishResume(in)
		}
	case provider.StateSuspended:
		switch in.phase {
		case phaseSuspending, phaseSuspendWait:
			s.setPhase(in, phaseSuspended)
			if in.env == nil && in.unclaimedAt.IsZero() {
				in.unclaimedAt = s.now
				s.deleteUnclaimedNow(in)
				return
			}
			if in.env != nil && in.env.inUse != nil {
				// A Resume arrived while the suspend was in progress.
				s.setPhase(in, phaseResuming)
				s.emit(Resume{ID: in.id})
			}
		}
	}
}

// reconcile decides the fate of an instance loaded from the store, from its
// first listing after a restart (DESIGN.md "Restart").
func (s *Scaler) reconcile(in *instance, st provider.State) {
	e := in.env
	switch st {
	case provider.StateDeleted:
		s.vanished(in)
		return
	case provider.StateDeleting:
		// Still listed, so still counting against max_instances until it is
		// gone: keep it as deleting rather than forgetting it (I3, I4).
		if in.restoredFrom != phaseDeleting {
			s.evict(in, fmt.Sprintf("instance %s is being deleted by the provider", in.id))
			in.deleteReason = ReasonRemovedByProvider
		}
		in.nextDecrease = s.now.Add(30 * time.Second)
		s.setPhase(in, phaseDeleting)
		return
	}
	if in.restoredFrom == phaseDeleting && st != provider.StateTimeout {
		// The deletion was decided and recorded before the restart; carry it
		// out whatever state the instance has reached, so it cannot leak.
		s.setPhase(in, phaseBooting)
		s.evict(in, fmt.Sprintf("instance %s was being deleted (%s)", in.id, in.deleteReason))
		s.deleteInstance(in, in.deleteReason)
		return
	}
	switch st {
	case provider.StateTimeout:
		s.setPhase(in, phaseBooting)
		s.failInstance(in, ReasonProviderTimeout, "the provider reported a timeout")
	case provider.StateCreating:
		s.setPhase(in, phaseCreating)
	case provider.StateRunning:
		switch {
		case e != nil:
			// The environment's job died, or the suspend had not started: park it.
			s.setPhase(in, phaseSuspendWait)
			s.issueSuspend(in)
		case in.restoredFrom == phaseCreating || in.restoredFrom == phaseBooting:
			s.setPhase(in, phaseCreating)
			s.observeOne(in, st)
		default:
			s.makeReady(in)
			if in.restoredFrom == phaseDraining {
				s.afterSlotFreed(in)
			}
		}
	case provider.StateSuspending:
		s.setPhase(in, phaseSuspending)
	case provider.StateSuspended:
		s.setPhase(in, phaseSuspended)
		switch {
		case e == nil:
			in.unclaimedAt = s.now
			s.deleteUnclaimedNow(in)
		case e.inUse != nil:
			// Resume was called before this first listing, while the
			// instance was only "restored": issue the resume now, or the
			// booking would wait for ever.
			s.setPhase(in, phaseResuming)
			s.emit(Resume{ID: in.id})
		}
	case provider.StateResuming:
		s.setPhase(in, phaseResuming)
	}
}

// deleteUnclaimedNow deletes a suspended instance that holds no environment
// at once when idle_time is 0 (DESIGN.md "Restart"), instead of waiting for
// the next Tick.
func (s *Scaler) deleteUnclaimedNow(in *instance) {
	if in.env == nil && s.policy().IdleTime <= 0 {
		s.deleteInstance(in, ReasonUnclaimed)
	}
}

// adopt accounts for an instance the core did not know.
func (s *Scaler) adopt(l Listed) {
	switch l.State {
	case provider.StateDeleted:
		return // gone; nothing to account for
	case provider.StateDeleting:
		// Going away, but it counts against max_instances until it is gone
		// (I3): track it as deleting.
		in := s.addInstance(l.ID, phaseDeleting)
		in.provState = l.State
		in.deleteReason = ReasonUnknown
		in.nextDecrease = s.now.Add(30 * time.Second)
		return
	}
	fromRequest := len(s.pending) > 0 && (l.State == provider.StateCreating || l.State == provider.StateRunning)
	if fromRequest {
		s.pending = s.pending[1:]
	} else if s.cfg.DeleteUnknown {
		in := s.addInstance(l.ID, phaseBooting)
		in.provState = l.State
		s.deleteInstance(in, ReasonUnknown)
		return
	}
	var in *instance
	switch l.State {
	case provider.StateSuspended, provider.StateSuspending:
		in = s.addInstance(l.ID, phaseSuspending)
		if l.State == provider.StateSuspended {
			s.setPhase(in, phaseSuspended)
			in.unclaimedAt = s.now
			s.deleteUnclaimedNow(in)
		}
	case provider.StateResuming:
		in = s.addInstance(l.ID, phaseResuming)
	case provider.StateTimeout:
		in = s.addInstance(l.ID, phaseBooting)
		s.failInstance(in, ReasonProviderTimeout, "the provider reported a timeout")
	default:
		in = s.addInstance(l.ID, phaseCreating)
		if !fromRequest && l.State == provider.StateRunning {
			// An unknown running instance was set up by a previous process:
			// adopt it idle without running the hook again.
			in.provState = l.State
			s.setPhase(in, phaseBooting)
			s.makeReady(in)
			return
		}
		s.observeOne(in, l.State)
	}
	in.provState = l.State
}

// ---- time ---------------------------------------------------------------------

// Tick runs the periodic work: scale-in, heartbeats, hook retries, timeouts,
// expiry of environments and of unclaimed suspended instances, and scale-up.
func (s *Scaler) Tick() {
	now := s.now
	p := s.policy()
	// Requests the provider never listed are written off.
	for len(s.pending) > 0 && now.Sub(s.pending[0]) >= s.cfg.ListingTimeout {
		s.pending = s.pending[1:]
		s.lastIncErr = fmt.Sprintf("a requested instance did not appear in the provider's listing within %s", s.cfg.ListingTimeout)
		s.dirty = true
	}
	var idle []*instance
	for _, in := range s.sortedInstances() {
		switch in.phase {
		case phaseCreating, phaseBooting:
			if now.Sub(in.created) >= s.cfg.ReadyTimeout {
				s.failInstance(in, ReasonNotReady, fmt.Sprintf("not ready within %s (last error: %s)", s.cfg.ReadyTimeout, orNone(in.lastErr)))
			} else if in.phase == phaseBooting && !in.hookPending && !in.nextHook.IsZero() && !now.Before(in.nextHook) {
				in.hookPending = true
				s.emit(RunReadyHook{ID: in.id})
			}
		case phaseReady:
			if s.cfg.HeartbeatInterval > 0 && !in.hbInFlight && !now.Before(in.nextHB) {
				in.hbInFlight = true
				in.nextHB = now.Add(s.cfg.HeartbeatInterval)
				s.emit(Heartbeat{ID: in.id})
			}
			// A ready instance can still hold a parked environment (a resumed
			// booking given back unused); that slot is not idle (I5).
			if in.used == 0 && in.env == nil && now.Sub(in.idleSince) >= p.IdleTime {
				idle = append(idle, in)
			}
		case phaseSuspending:
			if !in.nextSuspend.IsZero() && !now.Before(in.nextSuspend) {
				s.issueSuspend(in)
			}
		case phaseSuspended:
			if in.env == nil && !in.unclaimedAt.IsZero() && now.Sub(in.unclaimedAt) >= p.IdleTime {
				s.deleteInstance(in, ReasonUnclaimed)
			}
		case phaseDeleting:
			if !now.Before(in.nextDecrease) {
				in.nextDecrease = now.Add(30 * time.Second)
				s.emit(Decrease{ID: in.id, Reason: in.deleteReason})
			}
		}
	}
	for _, k := range s.Environments() {
		e := s.envs[k]
		if e.inUse != nil || now.Sub(e.parkedAt) < s.cfg.EnvTTL {
			continue
		}
		delete(s.envs, k)
		s.dirty = true
		if in := e.inst; in != nil {
			in.env = nil
			if in.used > 0 {
				// Other slots still run jobs (capacity_per_instance > 1,
				// suspend_wait): drain, and delete once they are free (I5).
				in.deleteReason = ReasonEnvExpired
				s.setPhase(in, phaseDraining)
				s.parkOthers(in)
				continue
			}
			s.deleteInstance(in, ReasonEnvExpired)
		}
	}
	s.scaleIn(idle, p)
	s.scaleUp()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (s *Scaler) sortedInstances() []*instance {
	out := make([]*instance, 0, len(s.instances))
	for _, in := range s.instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// ---- scaling ------------------------------------------------------------------

// demand returns the slots that need a running instance and the idle target.
func (s *Scaler) demand(p policy.Policy) (inUse, idleTarget int) {
	inUse = len(s.res) - s.offCurrentUsed
	idleTarget = p.IdleCount
	if p.ScaleFactor > 0 {
		f := min(int(math.Ceil(p.ScaleFactor*float64(inUse))), p.ScaleFactorLimit)
		idleTarget = max(idleTarget, f)
	}
	return inUse, idleTarget
}

func (s *Scaler) current() int {
	return s.byPhase[phaseCreating] + s.byPhase[phaseBooting] + s.byPhase[phaseReady] +
		s.byPhase[phaseResuming] + s.byPhase[phaseRestored] + len(s.pending)
}

// Total returns every instance that counts against max_instances, including
// requested ones not yet listed.
func (s *Scaler) Total() int { return len(s.instances) + len(s.pending) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// scaleUp requests instances when the desired count exceeds what exists. It
// is O(1), so it runs after every event.
func (s *Scaler) scaleUp() {
	p := s.policy()
	inUse, idleTarget := s.demand(p)
	desired := ceilDiv(inUse+idleTarget, s.cfg.CapacityPerInstance)
	have := s.current()
	want := min(desired-have, s.cfg.MaxInstances-s.Total())
	if want <= 0 || s.now.Before(s.hookPauseTo) || s.stopped {
		return
	}
	tokens := int(s.throttle.TokensAt(s.now))
	n := min(want, tokens)
	if n <= 0 {
		return // retried on the next tick when tokens refill
	}
	s.throttle.AllowN(s.now, n)
	for range n {
		s.pending = append(s.pending, s.now)
	}
	s.dirty = true
	s.emit(Scaled{Direction: "up", InUse: inUse, IdleSlots: idleTarget, Have: have, Want: desired, N: n})
	s.emit(Increase{N: n})
}

// scaleIn deletes idle instances beyond the desired count, oldest idle first.
// Candidates have no reserved, acquired or suspended slot; they leave the
// free list before the Decrease, so no Reserve can race the deletion.
func (s *Scaler) scaleIn(idle []*instance, p policy.Policy) {
	if len(idle) == 0 {
		return
	}
	inUse, idleTarget := s.demand(p)
	desired := ceilDiv(inUse+idleTarget, s.cfg.CapacityPerInstance)
	have := s.current()
	excess := have - desired
	if excess <= 0 {
		return
	}
	sort.SliceStable(idle, func(i, j int) bool { return idle[i].idleSince.Before(idle[j].idleSince) })
	n := min(excess, len(idle))
	s.emit(Scaled{Direction: "in", InUse: inUse, IdleSlots: idleTarget, Have: have, Want: desired, N: n})
	for _, in := range idle[:n] {
		s.deleteInstance(in, ReasonIdle)
	}
}

// DeleteAll deletes every instance that holds no job or environment, for
// delete_instances_on_shutdown.
func (s *Scaler) DeleteAll(reason Reason) {
	for _, in := range s.sortedInstances() {
		if in.used == 0 && in.env == nil && in.phase != phaseDeleting {
			s.deleteInstance(in, reason)
		}
	}
}
