// Package sim is a simulated cloud: an instance group whose instances boot,
// suspend, resume, fail and are deleted on a clock the caller owns.
//
// Deterministic simulation tests and `berth bench` drive it with a virtual
// clock, replaying days of job traces in seconds, so it starts no goroutines,
// never sleeps and never reads the wall clock on its own. Time moves only
// when the clock function passed to New says so; every call first applies,
// in time order, every state change that is due by then. A discrete-event
// loop can ask NextEventTime when the next change is due and jump there.
//
// # Lifecycle
//
// Increase creates instances at once (subject to Quota and
// IncreaseFailRate), with deterministic IDs sim-000001, sim-000002, ...
// Each is creating for BootTime plus 0..BootJitter and then running, unless
// NeverReadyRate made it one that stays creating for ever. Suspend moves a
// running instance to suspending and, SuspendLatency later, suspended;
// Resume moves a suspended one to resuming and, ResumeLatency later, to
// running. Decrease moves any instance to deleting and, DeleteLatency later,
// it is gone. The sim never reports timeout.
//
// # Listing lag
//
// An instance appears in Update only ListingLag after the Increase that
// created it, in whatever state it has reached by then. During the lag it
// exists for every other purpose: it boots, counts against Quota, is
// billed, can be killed, and ConnectInfo, Heartbeat, Decrease, Suspend and
// Resume accept its ID (a scaler cannot know the ID yet, but tests can).
//
// # Deletion and loss
//
// An instance is gone when its deletion completes, when Kill removes it, or
// when it fails on its own (MeanTimeToFailure). A gone instance is not
// listed any more. With ReportDeleted, an instance that had been listed is
// instead listed once as deleted, by the first Update after it went, and
// then never again. An instance that goes before it was ever listed never
// appears at all.
//
// # Billing
//
// An instance is billed from the Increase that created it until it is gone:
// until its deletion completes (Decrease time + DeleteLatency), or until the
// moment it was killed or failed. Instances still alive are billed up to
// the time given to BilledSeconds. Instances an Increase failed to create
// are not billed.
//
// # Use by the daemon
//
// The package registers itself as provider "sim". Built that way, the group
// runs on the real wall clock, so with provider = "sim" in berth's config
// instances become running BootTime of real time after they are asked for.
// Its configuration comes from [autoscaler.provider_config]; see
// Config.UnmarshalJSON for the keys. The sim has no machines and no SSH:
// ConnectInfo returns an address under the reserved .invalid domain, which
// no executor can reach.
package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/berth-ci/berth/provider"
)

// Version is the version string the group reports in Info.
const Version = "sim/1"

// Errors the group returns, wrapped with details; test them with errors.Is.
var (
	// ErrQuota means Increase asked for more instances than Quota allows.
	ErrQuota = errors.New("sim: instance quota exceeded")
	// ErrIncreaseFailed is an injected Increase failure (IncreaseFailRate).
	ErrIncreaseFailed = errors.New("sim: injected increase failure")
	// ErrUnknownInstance names an ID the group does not hold (never
	// created, or already gone).
	ErrUnknownInstance = errors.New("sim: unknown instance")
	// ErrInvalidState means the instance is in a state the call cannot act
	// on, e.g. Heartbeat on a creating instance or Resume on a running one.
	ErrInvalidState = errors.New("sim: instance is in the wrong state")
	// ErrUnsupported is returned by Suspend and Resume when the group was
	// configured without SupportsSuspend.
	ErrUnsupported = errors.New("sim: suspend is not supported (set supports_suspend = true)")
)

var (
	_ provider.InstanceGroup = (*Group)(nil)
	_ provider.Suspender     = (*Group)(nil)
)

func init() {
	provider.Register("sim", func() provider.InstanceGroup {
		return New(Config{}, time.Now)
	})
}

// instance is one simulated machine. Times are absolute virtual times.
type instance struct {
	id      string
	seq     int
	state   provider.State
	created time.Time

	listAt time.Time
	listed bool

	// pending is true while the current state is transitional and will
	// end at until. A never-ready instance is creating with pending false.
	pending    bool
	until      time.Time
	neverReady bool

	hasDeath bool
	deathAt  time.Time

	suspendedAt time.Time // when it last became suspended

	gone bool

	// next is the earliest due event; hidx is the position in the event
	// heap, -1 when nothing is due.
	next time.Time
	hidx int
}

// nextEvent returns the earliest pending event time and whether any exists.
func (in *instance) nextEvent() (time.Time, bool) {
	var t time.Time
	ok := false
	consider := func(c time.Time) {
		if !ok || c.Before(t) {
			t, ok = c, true
		}
	}
	if !in.listed {
		consider(in.listAt)
	}
	if in.pending {
		consider(in.until)
	}
	if in.hasDeath {
		consider(in.deathAt)
	}
	return t, ok
}

// endBy returns when billing for a live instance stops if nothing else
// happens, capped at now.
func (in *instance) endBy(now time.Time) time.Time {
	end := now
	if in.state == provider.StateDeleting && in.pending && in.until.Before(end) {
		end = in.until
	}
	if in.hasDeath && in.deathAt.Before(end) {
		end = in.deathAt
	}
	return end
}

// CallCounts counts provider calls by kind, whether they succeeded or not.
type CallCounts struct {
	Increase    int
	Decrease    int
	Update      int
	Suspend     int
	Resume      int
	Heartbeat   int
	ConnectInfo int
}

// Stats is what the bench reports about the simulated cloud.
type Stats struct {
	// Calls counts provider calls by kind.
	Calls CallCounts
	// Requested is the sum of n over all Increase calls.
	Requested int
	// Created counts instances Increase actually created.
	Created int
	// IncreaseErrors counts Increase calls that returned an error;
	// QuotaErrors counts those refused at least partly by Quota, and
	// InjectedFailures those failed by IncreaseFailRate (a call can be
	// both).
	IncreaseErrors   int
	QuotaErrors      int
	InjectedFailures int
	// Deleted counts instances whose deletion (after Decrease) completed.
	Deleted int
	// Lost counts instances that went without a Decrease: Kill or
	// MeanTimeToFailure.
	Lost int
	// NeverReady counts instances created to stay creating for ever.
	NeverReady int
	// Live is the number of instances not yet gone, including those still
	// hidden by ListingLag and those deleting.
	Live int
	// Peak is the most instances alive at once.
	Peak int
	// BilledSeconds is the instance-seconds billed up to the current
	// clock; see BilledSeconds.
	BilledSeconds float64
}

// InstanceInfo is a test's view of one instance.
type InstanceInfo struct {
	// ID is the instance ID.
	ID string
	// State is the current state.
	State provider.State
	// Listed is whether Update reports it yet (see ListingLag).
	Listed bool
	// Created is the virtual time of the Increase that created it.
	Created time.Time
	// NeverReady is true for an instance that will stay creating for ever.
	NeverReady bool
}

type listing struct {
	id    string
	state provider.State
}

// Group is the simulated instance group. It implements
// provider.InstanceGroup and provider.Suspender, and is safe for concurrent
// use, though simulations drive it from one goroutine.
type Group struct {
	mu    sync.Mutex
	cfg   Config
	clock func() time.Time
	rng   *rand.Rand

	// now is the latest clock reading; it never goes backwards, so a
	// clock that does cannot undo state changes already applied.
	now time.Time

	seq         int
	byID        map[string]*instance
	order       []*instance // creation order; may hold gone instances until compacted
	goneInOrder int
	events      eventHeap
	tombstones  []string
	live        int

	st         Stats
	closedSec  int64 // billing of gone instances, as seconds + nanoseconds
	closedNsec int64 // to stay exact over very long runs

	// suspendedClosed is the suspended time of instances no longer
	// suspended; suspendedNow counts those suspended now. See
	// SuspendedSeconds.
	suspendedClosed time.Duration
	suspendedNow    int

	buf []listing // reused by Update
}

// New returns a group that behaves as cfg says on the given clock. The clock
// is owned by the caller; for a virtual clock it is typically a closure over
// a time.Time the simulation advances. New panics if cfg is invalid (see
// Config.Validate) or clock is nil, since both are programming errors.
func New(cfg Config, clock func() time.Time) *Group {
	if clock == nil {
		panic("sim: New called with a nil clock")
	}
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return &Group{
		cfg:   cfg,
		clock: clock,
		rng:   newRNG(cfg.Seed),
		byID:  make(map[string]*instance),
	}
}

func newRNG(seed uint64) *rand.Rand {
	// The second PCG word is a fixed odd constant so a single Seed fully
	// determines the stream.
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
}

// Config returns the group's configuration.
func (g *Group) Config() Config {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cfg
}

// tick reads the clock and applies every event due by then.
func (g *Group) tick() time.Time {
	t := g.clock()
	if t.Before(g.now) {
		t = g.now
	}
	g.now = t
	g.process(t)
	return t
}

// process applies every event due at or before t, earliest first.
func (g *Group) process(t time.Time) {
	for len(g.events) > 0 && !g.events[0].next.After(t) {
		g.step(g.events[0])
	}
}

// step applies the events of in that are due at in.next.
func (g *Group) step(in *instance) {
	at := in.next
	if !in.listed && !in.listAt.After(at) {
		in.listed = true
	}
	if in.pending && !in.until.After(at) {
		in.pending = false
		switch in.state {
		case provider.StateCreating, provider.StateResuming:
			in.state = provider.StateRunning
		case provider.StateSuspending:
			in.state = provider.StateSuspended
			in.suspendedAt = in.until
			g.suspendedNow++
		case provider.StateDeleting:
			g.finish(in, in.until, false)
			return
		}
	}
	if in.hasDeath && !in.deathAt.After(at) {
		g.finish(in, in.deathAt, true)
		return
	}
	g.reschedule(in)
}

// reschedule puts in where its next event belongs in the heap.
func (g *Group) reschedule(in *instance) {
	next, ok := in.nextEvent()
	if !ok {
		if in.hidx >= 0 {
			g.events.remove(in)
		}
		return
	}
	in.next = next
	if in.hidx < 0 {
		g.events.push(in)
	} else {
		g.events.fix(in)
	}
}

// finish makes in gone at end and closes its bill.
func (g *Group) finish(in *instance, end time.Time, lost bool) {
	g.leaveSuspended(in, end)
	in.gone = true
	in.pending = false
	if in.hidx >= 0 {
		g.events.remove(in)
	}
	delete(g.byID, in.id)
	g.live--
	g.goneInOrder++
	g.addClosed(end.Sub(in.created))
	if lost {
		g.st.Lost++
	} else {
		g.st.Deleted++
	}
	if in.listed && g.cfg.ReportDeleted {
		g.tombstones = append(g.tombstones, in.id)
	}
}

// leaveSuspended closes the suspended time of an instance that stops being
// suspended at t.
func (g *Group) leaveSuspended(in *instance, t time.Time) {
	if in.state != provider.StateSuspended {
		return
	}
	g.suspendedNow--
	if d := t.Sub(in.suspendedAt); d > 0 {
		g.suspendedClosed += d
	}
}

// SuspendedSeconds returns how many of the billed instance-seconds up to now
// were spent suspended (a part of BilledSeconds), so that a cost model can
// price them lower than running ones.
func (g *Group) SuspendedSeconds(now time.Time) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tick()
	d := g.suspendedClosed
	for _, in := range g.order {
		if !in.gone && in.state == provider.StateSuspended && now.After(in.suspendedAt) {
			d += now.Sub(in.suspendedAt)
		}
	}
	return d.Seconds()
}

// Suspended returns how many instances are suspended at the current clock.
func (g *Group) Suspended() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tick()
	return g.suspendedNow
}

func (g *Group) addClosed(d time.Duration) {
	if d <= 0 {
		return
	}
	g.closedSec += int64(d / time.Second)
	g.closedNsec += int64(d % time.Second)
	if g.closedNsec >= int64(time.Second) {
		g.closedSec++
		g.closedNsec -= int64(time.Second)
	}
}

// compact drops gone instances from order; callers amortise it against the
// O(instances) work they do anyway.
func (g *Group) compact() {
	if g.goneInOrder == 0 {
		return
	}
	kept := g.order[:0]
	for _, in := range g.order {
		if !in.gone {
			kept = append(kept, in)
		}
	}
	clear(g.order[len(kept):])
	g.order = kept
	g.goneInOrder = 0
}

func (g *Group) create(now time.Time) {
	g.seq++
	in := &instance{
		id:      fmt.Sprintf("sim-%06d", g.seq),
		seq:     g.seq,
		state:   provider.StateCreating,
		created: now,
		listAt:  now.Add(g.cfg.ListingLag),
		hidx:    -1,
	}
	boot := g.cfg.BootTime
	if g.cfg.BootJitter > 0 {
		boot += time.Duration(g.rng.Int64N(int64(g.cfg.BootJitter) + 1))
	}
	if g.cfg.NeverReadyRate > 0 && g.rng.Float64() < g.cfg.NeverReadyRate {
		in.neverReady = true
		g.st.NeverReady++
	} else {
		in.pending = true
		in.until = now.Add(boot)
	}
	if g.cfg.MeanTimeToFailure > 0 {
		f := g.rng.ExpFloat64() * float64(g.cfg.MeanTimeToFailure)
		if f > math.MaxInt64/2 {
			f = math.MaxInt64 / 2
		}
		in.hasDeath = true
		in.deathAt = now.Add(time.Duration(f))
	}
	g.byID[in.id] = in
	g.order = append(g.order, in)
	g.live++
	g.st.Created++
	g.reschedule(in)
}

// Init applies Settings.Config, if any, on top of the group's Config (keys
// absent from the JSON keep their values) and reports the group. Config may
// only change before the first instance is created, since changing the seed
// or latencies midway would make a run impossible to reproduce.
func (g *Group) Init(ctx context.Context, s provider.Settings) (provider.Info, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return provider.Info{}, err
	}
	if raw := strings.TrimSpace(string(s.Config)); raw != "" && raw != "null" {
		if g.seq > 0 {
			return provider.Info{}, errors.New("sim: Init with a config after instances were created; configure the group before using it")
		}
		cfg := g.cfg
		if err := json.Unmarshal(s.Config, &cfg); err != nil {
			return provider.Info{}, err
		}
		g.cfg = cfg
		g.rng = newRNG(cfg.Seed)
	}
	return provider.Info{
		ID: fmt.Sprintf("sim/seed-%d", g.cfg.Seed),
		// The quota is deliberately not advertised; see Config.Quota.
		MaxSize: 0,
		Version: Version,
		// Disposable as the clouds it stands for.
		Capabilities: provider.Capabilities{Suspend: g.cfg.SupportsSuspend, Disposable: true},
	}, nil
}

// Update calls fn for every listed instance with its state at the current
// clock, in creation order, followed (with ReportDeleted) by instances gone
// since the previous Update, as deleted. fn runs without the group's lock
// held, so it may call the group.
func (g *Group) Update(ctx context.Context, fn func(id string, s provider.State)) error {
	g.mu.Lock()
	g.st.Calls.Update++
	if err := ctx.Err(); err != nil {
		g.mu.Unlock()
		return err
	}
	g.tick()
	buf := g.buf[:0]
	g.buf = nil
	kept := g.order[:0]
	for _, in := range g.order {
		if in.gone {
			continue
		}
		kept = append(kept, in)
		if in.listed {
			buf = append(buf, listing{in.id, in.state})
		}
	}
	clear(g.order[len(kept):])
	g.order = kept
	g.goneInOrder = 0
	for _, id := range g.tombstones {
		buf = append(buf, listing{id, provider.StateDeleted})
	}
	g.tombstones = g.tombstones[:0]
	g.mu.Unlock()

	for _, l := range buf {
		fn(l.id, l.state)
	}

	g.mu.Lock()
	if cap(buf) > cap(g.buf) {
		g.buf = buf[:0]
	}
	g.mu.Unlock()
	return nil
}

// Increase creates up to n instances at the current clock. It creates fewer
// when Quota would be exceeded (error wraps ErrQuota) or when an injected
// failure strikes (a random count below what was possible, error wraps
// ErrIncreaseFailed); the count returned is always what was created.
func (g *Group) Increase(ctx context.Context, n int) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.Calls.Increase++
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("sim: Increase(%d): n must not be negative", n)
	}
	if n == 0 {
		return 0, nil
	}
	now := g.tick()
	g.st.Requested += n

	allowed := n
	quotaHit := false
	if q := g.cfg.Quota; q > 0 && g.live+n > q {
		allowed = max(0, q-g.live)
		quotaHit = true
	}
	create := allowed
	failed := false
	if g.cfg.IncreaseFailRate > 0 && g.rng.Float64() < g.cfg.IncreaseFailRate {
		failed = true
		create = 0
		if allowed > 0 {
			create = g.rng.IntN(allowed)
		}
	}
	liveBefore := g.live
	if g.goneInOrder > 1024 && g.goneInOrder > len(g.order)/2 {
		g.compact()
	}
	for range create {
		g.create(now)
	}
	g.st.Peak = max(g.st.Peak, g.live)
	// Zero boot time or listing lag is due at once.
	g.process(now)

	var errs []error
	if failed {
		g.st.InjectedFailures++
		errs = append(errs, fmt.Errorf("%w: created %d of %d requested instances", ErrIncreaseFailed, create, n))
	}
	if quotaHit {
		g.st.QuotaErrors++
		errs = append(errs, fmt.Errorf("%w: quota is %d instances and %d exist; created %d of %d requested", ErrQuota, g.cfg.Quota, liveBefore, create, n))
	}
	if len(errs) > 0 {
		g.st.IncreaseErrors++
		return create, errors.Join(errs...)
	}
	return create, nil
}

// Decrease starts deleting the given instances: each is deleting until
// DeleteLatency has passed, then gone. An instance already deleting is
// accepted again without changing when its deletion completes. IDs the group
// does not hold are left out of the result and named in an error wrapping
// ErrUnknownInstance.
func (g *Group) Decrease(ctx context.Context, ids []string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.Calls.Decrease++
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := g.tick()
	accepted := make([]string, 0, len(ids))
	var unknown []string
	for _, id := range ids {
		in, ok := g.byID[id]
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		accepted = append(accepted, id)
		if in.state == provider.StateDeleting {
			continue
		}
		g.leaveSuspended(in, now)
		in.state = provider.StateDeleting
		in.pending = true
		in.until = now.Add(g.cfg.DeleteLatency)
		g.reschedule(in)
	}
	g.process(now)
	if len(unknown) > 0 {
		return accepted, fmt.Errorf("%w: %s", ErrUnknownInstance, strings.Join(unknown, ", "))
	}
	return accepted, nil
}

// transition moves the instances among ids that are in state from to the
// transitional state via, ending after latency; the others are reported in
// an error.
func (g *Group) transition(ctx context.Context, ids []string, from, via provider.State, latency time.Duration) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !g.cfg.SupportsSuspend {
		return nil, ErrUnsupported
	}
	now := g.tick()
	accepted := make([]string, 0, len(ids))
	var errs []error
	for _, id := range ids {
		in, ok := g.byID[id]
		if !ok {
			errs = append(errs, fmt.Errorf("%w: %s", ErrUnknownInstance, id))
			continue
		}
		if in.state != from {
			errs = append(errs, fmt.Errorf("%w: %s is %s, not %s", ErrInvalidState, id, in.state, from))
			continue
		}
		g.leaveSuspended(in, now)
		in.state = via
		in.pending = true
		in.until = now.Add(latency)
		g.reschedule(in)
		accepted = append(accepted, id)
	}
	g.process(now)
	return accepted, errors.Join(errs...)
}

// Suspend starts suspending the given running instances: each is suspending
// for SuspendLatency, then suspended. Instances that are not running are
// left out and reported in the error (ErrInvalidState, ErrUnknownInstance).
func (g *Group) Suspend(ctx context.Context, ids []string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.Calls.Suspend++
	return g.transition(ctx, ids, provider.StateRunning, provider.StateSuspending, g.cfg.SuspendLatency)
}

// Resume starts resuming the given suspended instances: each is resuming
// for ResumeLatency, then running. Instances that are not suspended are left
// out and reported in the error.
func (g *Group) Resume(ctx context.Context, ids []string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.Calls.Resume++
	return g.transition(ctx, ids, provider.StateSuspended, provider.StateResuming, g.cfg.ResumeLatency)
}

// ConnectInfo returns a fake address for any instance the group holds. The
// sim has no SSH server: the address is under the reserved .invalid domain
// and HostKey is empty, so an executor that tries to connect fails rather
// than reaching something real.
func (g *Group) ConnectInfo(ctx context.Context, id string) (provider.ConnectInfo, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.Calls.ConnectInfo++
	if err := ctx.Err(); err != nil {
		return provider.ConnectInfo{}, err
	}
	g.tick()
	if _, ok := g.byID[id]; !ok {
		return provider.ConnectInfo{}, fmt.Errorf("%w: %s", ErrUnknownInstance, id)
	}
	return provider.ConnectInfo{
		ID:       id,
		Addr:     id + ".sim.invalid:22",
		Username: "berth",
		OS:       "linux",
		Arch:     "amd64",
	}, nil
}

// Heartbeat succeeds only for an instance that is running now; it fails with
// ErrUnknownInstance for a gone one and ErrInvalidState for any other state.
func (g *Group) Heartbeat(ctx context.Context, id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.st.Calls.Heartbeat++
	if err := ctx.Err(); err != nil {
		return err
	}
	g.tick()
	in, ok := g.byID[id]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownInstance, id)
	}
	if in.state != provider.StateRunning {
		return fmt.Errorf("%w: %s is %s, not running", ErrInvalidState, id, in.state)
	}
	return nil
}

// Shutdown does nothing: like a real cloud, the instances stay (and stay
// billed) after the scaler lets go of the group.
func (g *Group) Shutdown(ctx context.Context) error {
	return nil
}

// Kill removes an instance at the current clock as a provider-side loss
// (spot reclaim, host failure): it is gone at once, without passing
// through deleting, and its billing stops now. It fails with
// ErrUnknownInstance for an ID the group does not hold.
func (g *Group) Kill(id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.tick()
	in, ok := g.byID[id]
	if !ok {
		return fmt.Errorf("%w: %s", ErrUnknownInstance, id)
	}
	g.finish(in, now, true)
	return nil
}

// Instances returns every instance not yet gone, listed or not, in creation
// order, with its state at the current clock.
func (g *Group) Instances() []InstanceInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tick()
	out := make([]InstanceInfo, 0, g.live)
	for _, in := range g.order {
		if in.gone {
			continue
		}
		out = append(out, InstanceInfo{
			ID:         in.id,
			State:      in.state,
			Listed:     in.listed,
			Created:    in.created,
			NeverReady: in.neverReady,
		})
	}
	return out
}

// Stats returns the counters at the current clock.
func (g *Group) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.tick()
	s := g.st
	s.Live = g.live
	s.BilledSeconds = g.billed(now)
	return s
}

// BilledSeconds returns the instance-seconds billed up to now: for every
// gone instance, the time from its Increase to its deletion completing (or
// its loss), and for every live one, the time from its Increase to now, or
// to its already scheduled end if that comes first. now is meant to be at
// or after the current clock; state is first brought up to the clock.
func (g *Group) BilledSeconds(now time.Time) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tick()
	return g.billed(now)
}

func (g *Group) billed(now time.Time) float64 {
	sec, nsec := g.closedSec, g.closedNsec
	for _, in := range g.order {
		if in.gone {
			continue
		}
		d := in.endBy(now).Sub(in.created)
		if d <= 0 {
			continue
		}
		sec += int64(d / time.Second)
		nsec += int64(d % time.Second)
	}
	return float64(sec) + float64(nsec)/float64(time.Second)
}

// NextEventTime returns the earliest virtual time after the current clock
// at which some instance changes state, becomes listed, or fails on its
// own; the zero time if nothing is scheduled. A discrete-event loop advances
// its clock straight to it. Events caused by later calls (Decrease, Kill,
// ...) are of course not known yet.
func (g *Group) NextEventTime() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tick()
	if len(g.events) == 0 {
		return time.Time{}
	}
	return g.events[0].next
}
