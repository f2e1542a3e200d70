// Package fleet runs the deterministic core (package scaler) against a real
// provider with real time. It is the core's single owner: every call takes
// one lock, feeds the core an event, persists its durable state when it
// changed, and then carries out the actions the core returned — provider
// calls in goroutines whose results come back as events, and wake-ups of
// waiting Acquire and Resume calls. Calls that queue up for the lock are
// fed to the core together and share one save (see do).
//
// Under high availability the store is fenced by leadership (package ha):
// a save refused with store.ErrFenced stops the fleet for good — no action
// of that flush nor any later one is carried out, every call returns
// ErrStopped, and Fenced is closed — and every provider call first asks the
// store whether this manager still leads (store.Leader).
package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-ci/berth/internal/oneshot"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
	"github.com/berth-ci/berth/store"
)

// Store persists the core's durable state. store.Bolt and ha.Store
// implement it; a Store that also implements store.Leader is asked before
// every provider call whether this manager still leads.
type Store interface {
	Save(scaler.State) error
}

// Options configure a Fleet.
type Options struct {
	// Provider is the initialised instance group.
	Provider provider.InstanceGroup
	// Store persists state before provider calls; nil keeps state in memory only.
	Store Store
	// Logger receives one line per decision.
	Logger *slog.Logger
	// ReadyHook runs instance_ready_command on an instance; nil means none.
	ReadyHook func(ctx context.Context, id string) error
	// ResetInstance resets an instance found running with no record of
	// what ran on it (scaler.Config.ResetAdopted); nil means none.
	ResetInstance func(ctx context.Context, id string) error
	// UpdateInterval is how often the provider is listed (default 5s).
	UpdateInterval time.Duration
	// TickInterval is how often periodic decisions run (default 1s).
	TickInterval time.Duration
	// CallTimeout bounds each provider call (default 2m).
	CallTimeout time.Duration
	// Observe sees every action the core decides, for metrics. It runs under
	// the fleet's lock and must be fast.
	Observe func(scaler.Action)
	// Clock returns the time (default time.Now).
	Clock func() time.Time
}

// Acquisition is a booking bound to a slot on a ready instance.
type Acquisition struct {
	// Key is the booking key.
	Key string
	// Instance is the instance's ID.
	Instance string
	// Connect tells the executor how to reach the instance.
	Connect provider.ConnectInfo
	// State is the saved state of a resumed environment.
	State []byte
	// Lost is closed when the instance is lost while the job runs; LostReason
	// then says why.
	Lost <-chan struct{}
	lost *lostSignal
}

// LostReason says why the acquisition's instance was lost, or "" if it was not.
func (a Acquisition) LostReason() string {
	if a.lost == nil {
		return ""
	}
	a.lost.mu.Lock()
	defer a.lost.mu.Unlock()
	return a.lost.reason
}

// AfterLost arranges for f to run in its own goroutine when the instance is
// lost (at once if it was), as context.AfterFunc does for a context: a
// running job is watched without a goroutine of its own. stop unregisters
// f and reports whether that kept f from running.
func (a Acquisition) AfterLost(f func()) (stop func() bool) {
	if a.lost == nil {
		return func() bool { return false }
	}
	return a.lost.hooks.After(f)
}

type lostSignal struct {
	ch     chan struct{}
	mu     sync.Mutex
	reason string
	hooks  oneshot.Hooks
}

type result struct {
	id    string
	state []byte
	err   error
}

// Fleet owns a core and a provider.
type Fleet struct {
	opts Options
	log  *slog.Logger
	susp provider.Suspender

	pendMu  sync.Mutex
	pending []*pendingCall // do calls waiting for mu; run together by its next holder

	mu      sync.Mutex
	core    *scaler.Scaler
	waiters map[string]chan result
	lost    map[string]*lostSignal
	changed chan struct{}
	// listed is closed, and replaced, after every listing the core saw.
	listed  chan struct{}
	saveErr error

	kick  chan struct{}
	ctx   context.Context // for provider calls; set by Run
	calls inflight
	// sized is set once the provider's requested size settled the
	// increases restored from the store (requested.go).
	sized bool

	// leader is the store's leadership check, nil without one.
	leader store.Leader
	// stopped is closed once a fenced save or leadership check stopped the
	// fleet; stopErr (set under mu before the close) says why.
	stopped chan struct{}
	stopErr error
	// incErr is the core's IncreaseError as of the last flush, read
	// without mu: /healthz must not wait while a save to a frozen etcd
	// holds the lock (issue 43).
	incErr atomic.Pointer[string]
}

// inflight counts provider calls in flight. Unlike a sync.WaitGroup it may
// be waited on while new calls start (the job loops and ticks go on during
// shutdown), which a WaitGroup forbids and the race detector caught.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n drops to 0; nil while n is 0
}

func (c *inflight) add() {
	c.mu.Lock()
	if c.n == 0 {
		c.zero = make(chan struct{})
	}
	c.n++
	c.mu.Unlock()
}

func (c *inflight) done() {
	c.mu.Lock()
	c.n--
	if c.n == 0 {
		close(c.zero)
		c.zero = nil
	}
	c.mu.Unlock()
}

// wait returns once no call is in flight, or ctx is done.
func (c *inflight) wait(ctx context.Context) {
	for {
		c.mu.Lock()
		ch := c.zero
		c.mu.Unlock()
		if ch == nil {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// New wraps core. Call Run to start the periodic loops.
func New(core *scaler.Scaler, opts Options) *Fleet {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.UpdateInterval <= 0 {
		opts.UpdateInterval = 5 * time.Second
	}
	if opts.TickInterval <= 0 {
		opts.TickInterval = time.Second
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 2 * time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	f := &Fleet{opts: opts, log: opts.Logger, core: core,
		waiters: map[string]chan result{}, lost: map[string]*lostSignal{},
		changed: make(chan struct{}), listed: make(chan struct{}), kick: make(chan struct{}, 1), ctx: context.Background(),
		stopped: make(chan struct{})}
	f.susp, _ = opts.Provider.(provider.Suspender)
	f.leader, _ = opts.Store.(store.Leader)
	return f
}

// do runs fn on the core under the lock, then persists and dispatches.
// Calls that arrive while another holds the lock are run together by the
// next holder, with one save for all of them (group commit): each booking,
// binding and release of 1,000 starting jobs used to wait for its own
// state.db commit under the lock, one after the other (issue 23). A call
// returns only once the state its fn changed is saved and the resulting
// actions are carried out, as before. Once the fleet stopped (this manager
// no longer leads) fn does not run and do returns ErrStopped; a call whose
// save was refused by the fence returns it too, whatever fn did.
func (f *Fleet) do(fn func(c *scaler.Scaler)) error {
	if err := f.Err(); err != nil {
		return err
	}
	p := &pendingCall{fn: fn, done: make(chan struct{})}
	f.pendMu.Lock()
	f.pending = append(f.pending, p)
	f.pendMu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-p.done: // the previous holder ran it with its own
		return p.err
	default:
	}
	f.pendMu.Lock()
	calls := f.pending
	f.pending = nil
	f.pendMu.Unlock()
	if f.stopErr == nil {
		f.advance()
		for _, c := range calls {
			c.fn(f.core)
		}
		f.flushLocked()
	}
	for _, c := range calls {
		c.err = f.stopErr
		close(c.done)
	}
	return p.err
}

// pendingCall is a do call waiting for the lock.
type pendingCall struct {
	fn   func(c *scaler.Scaler)
	done chan struct{} // closed once fn ran and its state was saved
	err  error         // ErrStopped when it was not; set before done is closed
}

// advance gives the core the time, under the lock.
func (f *Fleet) advance() {
	before, jumps := f.core.Now(), f.core.ClockJumps()
	f.core.Advance(f.opts.Clock())
	if f.core.ClockJumps() != jumps {
		f.log.Warn("the clock jumped; parked environments age by at most the core's step for it, so the jump does not expire them",
			"from", before.UTC().Format(time.RFC3339), "to", f.core.Now().UTC().Format(time.RFC3339), "max_step", f.core.Config().MaxClockStep)
	}
}

// flushLocked persists the durable state if it changed and carries out the
// core's actions. Provider actions run only after the state that records
// their intent is saved. If saving fails, Increases are not carried out,
// and other actions are (a full disk: each is safe by the restart rules
// without its intent, and deletions keep costs down); if the store refused
// the save because this manager no longer leads, nothing is carried out,
// now or ever, and the fleet stops.
func (f *Fleet) flushLocked() {
	defer func() {
		if e := f.core.IncreaseError(); f.incErr.Load() == nil || *f.incErr.Load() != e {
			f.incErr.Store(&e)
		}
	}()
	for f.core.HasReady() {
		actions, dirty := f.core.Ready()
		saved := true
		if dirty && f.opts.Store != nil {
			if err := f.opts.Store.Save(f.core.State()); errors.Is(err, store.ErrFenced) {
				f.stopLocked(err)
				return
			} else if err != nil {
				saved = false
				if f.saveErr == nil {
					f.log.Error("cannot save state; not creating instances until it works again", "err", err)
				}
				f.saveErr = err
			} else if f.saveErr != nil {
				f.log.Info("state saved again")
				f.saveErr = nil
			}
		}
		for _, a := range actions {
			f.dispatch(a, saved)
		}
		if len(actions) > 0 || dirty {
			close(f.changed)
			f.changed = make(chan struct{})
		}
	}
}

func (f *Fleet) dispatch(a scaler.Action, saved bool) {
	if f.opts.Observe != nil {
		f.opts.Observe(a)
	}
	switch a := a.(type) {
	case scaler.Increase:
		if !saved {
			f.core.IncreaseResult(a.N, 0, fmt.Errorf("state not saved: %w", f.saveErr))
			return
		}
		f.call(func(ctx context.Context, err error) {
			n := 0
			if err == nil {
				n, err = f.opts.Provider.Increase(ctx, a.N)
			}
			if err != nil {
				f.log.Warn("increase failed", "requested", a.N, "created", n, "err", err)
			}
			f.do(func(c *scaler.Scaler) { c.IncreaseResult(a.N, n, err) })
			f.Kick()
		})
	case scaler.Decrease:
		msg := "delete instance"
		if a.Reason == scaler.ReasonReplacedUnknown {
			// Say why: the operator may have started it by hand.
			msg = "delete instance found running with no record of it: it cannot be reset, so a fresh one replaces it"
		}
		f.log.Info(msg, "id", a.ID, "reason", a.Reason)
		f.call(func(ctx context.Context, err error) {
			if err == nil {
				_, err = f.opts.Provider.Decrease(ctx, []string{a.ID})
			}
			if err != nil {
				f.log.Warn("decrease failed; will retry", "id", a.ID, "err", err)
			}
			f.do(func(c *scaler.Scaler) { c.DecreaseResult([]string{a.ID}, err) })
			f.Kick()
		})
	case scaler.Suspend:
		f.log.Info("suspend instance", "id", a.ID)
		f.call(func(ctx context.Context, err error) {
			if err == nil {
				err = f.suspendResume(ctx, a.ID, true)
			}
			f.do(func(c *scaler.Scaler) { c.SuspendResult(a.ID, err) })
			f.Kick()
		})
	case scaler.Resume:
		f.log.Info("resume instance", "id", a.ID)
		f.call(func(ctx context.Context, err error) {
			if err == nil {
				err = f.suspendResume(ctx, a.ID, false)
			}
			f.do(func(c *scaler.Scaler) { c.ResumeResult(a.ID, err) })
			f.Kick()
		})
	case scaler.RunReadyHook:
		f.call(func(ctx context.Context, err error) {
			hook, what := f.opts.ReadyHook, "instance_ready_command failed"
			if a.Reset {
				hook, what = f.opts.ResetInstance, "reset of an instance found running with no record of it failed; deleting it"
			}
			if err == nil && hook != nil {
				err = hook(ctx, a.ID)
			}
			if err != nil {
				f.log.Warn(what, "id", a.ID, "err", err)
			} else if a.Reset {
				f.log.Info("instance found running with no record of it was reset before any job", "id", a.ID)
			}
			f.do(func(c *scaler.Scaler) { c.HookResult(a.ID, err) })
		})
	case scaler.Heartbeat:
		f.call(func(ctx context.Context, err error) {
			if err == nil {
				err = f.opts.Provider.Heartbeat(ctx, a.ID)
			}
			if err != nil {
				f.log.Warn("heartbeat failed", "id", a.ID, "err", err)
			}
			f.do(func(c *scaler.Scaler) { c.HeartbeatResult(a.ID, err) })
		})
	default:
		f.note(a)
	}
}

// note carries out the actions that make no provider call: answering the
// callers waiting for a slot or a lost instance, and the core's decisions
// worth a log line.
func (f *Fleet) note(a scaler.Action) {
	switch a := a.(type) {
	case scaler.Bound:
		if ch, ok := f.waiters[a.Key]; ok {
			delete(f.waiters, a.Key)
			ch <- result{id: a.InstanceID, state: a.State}
		}
	case scaler.Failed:
		if ch, ok := f.waiters[a.Key]; ok {
			delete(f.waiters, a.Key)
			ch <- result{err: a.Err}
		}
	case scaler.Moved:
		f.log.Warn("instance went before its job reached it; the job moves to another instance", "key", a.Key, "id", a.From, "reason", a.Reason)
	case scaler.Lost:
		f.log.Warn("instance lost under a running job", "key", a.Key, "id", a.InstanceID, "reason", a.Reason)
		if l, ok := f.lost[a.Key]; ok {
			l.mu.Lock()
			l.reason = a.Reason
			l.mu.Unlock()
			close(l.ch)
			l.hooks.Fire()
			delete(f.lost, a.Key)
		}
	case scaler.PendingWrittenOff:
		f.log.Warn("increases pending from before the restart written off: they no longer count toward max_instances", "n", a.N, "pending", a.Left, "why", a.Why)
	case scaler.Gone:
		f.log.Info("instance gone", "id", a.ID, "reason", a.Reason, "lifetime", a.Lifetime.Round(time.Second))
	case scaler.EnvEvicted:
		f.log.Warn("parked environment evicted to make room for queued jobs", "env", a.Key, "id", a.InstanceID,
			"parked_for", a.ParkedFor.Round(time.Second), "why", a.Why)
	case scaler.Scaled:
		f.log.Info("scale "+a.Direction, "in_use", a.InUse, "idle_target", a.IdleSlots, "have", a.Have, "want", a.Want, "n", a.N,
			"suspended", a.Suspended, "suspended_target", a.SuspendedTarget)
	case scaler.Sized:
		f.log.Info("pools sized for target_wait", "hot", a.Hot, "suspended", a.Suspended, "tier", a.Tier,
			"forecast_rate_per_s", a.Rate, "forecast_burst", a.Burst, "forecast_from", a.Source,
			"boot_time", a.BootTime.Round(time.Second), "resume_time", a.ResumeTime.Round(time.Second), "target_wait", a.TargetWait,
			"refill_trust", math.Round(a.RefillTrust*1000)/1000, "refill_horizon", a.RefillHorizon.Round(time.Second),
			"keep", a.Keep.Round(time.Second), "keep_depth", a.Drain, "keep_all", a.KeepAll)
	}
}

func (f *Fleet) suspendResume(ctx context.Context, id string, suspend bool) error {
	if f.susp == nil {
		return scaler.ErrSuspendUnsupported
	}
	var err error
	if suspend {
		_, err = f.susp.Suspend(ctx, []string{id})
	} else {
		_, err = f.susp.Resume(ctx, []string{id})
	}
	return err
}

// call runs a provider call in its own goroutine with the call timeout. It
// is called under the lock, which guards f.ctx. Right before the call it
// confirms that this manager still leads: once it does not, fn is not run
// at all (the fleet stopped); when the store cannot tell before the
// timeout, fn gets that error instead of making the call, and reports it
// as the call's result.
func (f *Fleet) call(fn func(ctx context.Context, err error)) {
	base := f.ctx
	f.calls.add()
	go func() {
		defer f.calls.done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(base), f.opts.CallTimeout)
		defer cancel()
		err := f.confirm(ctx)
		if errors.Is(err, ErrStopped) {
			return
		}
		fn(ctx, err)
	}()
}

// Kick asks for a provider listing soon.
func (f *Fleet) Kick() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Run lists the provider and ticks the core until ctx is done, then waits for
// provider calls in flight. It returns nil then, or the ErrStopped error
// once this manager no longer leads (see Fenced). A provider that implements provider.Notifier
// makes it list at once when an instance changes state, so a job waiting for
// a booting instance starts the moment the instance is ready rather than at
// the next periodic listing.
func (f *Fleet) Run(ctx context.Context) error {
	f.mu.Lock()
	f.ctx = ctx
	f.mu.Unlock()
	if n, ok := f.opts.Provider.(provider.Notifier); ok {
		n.Notify(func(id string, s provider.State) {
			f.log.Debug("provider reported a state change; listing now", "id", id, "state", s)
			f.Kick()
		})
		defer n.Notify(nil)
	}
	f.update(ctx) // the first listing reconciles a restored state
	upd := time.NewTicker(f.opts.UpdateInterval)
	tick := time.NewTicker(f.opts.TickInterval)
	defer upd.Stop()
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			f.calls.wait(context.Background())
			return nil
		case <-f.stopped:
			f.calls.wait(context.Background())
			return f.Err()
		case <-upd.C:
			f.update(ctx)
		case <-f.kick:
			f.update(ctx)
		case <-tick.C:
			f.do(func(c *scaler.Scaler) { c.Tick() })
		}
	}
}

func (f *Fleet) update(ctx context.Context) {
	if f.Err() != nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, f.opts.CallTimeout)
	defer cancel()
	// A listing changes nothing at the provider, but its result drives
	// the core: a stale leader must not even list (a timer that fired
	// during a SIGSTOP).
	if err := f.confirm(cctx); err != nil {
		if !errors.Is(err, ErrStopped) && ctx.Err() == nil {
			f.log.Warn("provider listing not made; keeping the last view", "err", err)
		}
		return
	}
	var listing []scaler.Listed
	err := f.opts.Provider.Update(cctx, func(id string, s provider.State) {
		listing = append(listing, scaler.Listed{ID: id, State: s})
	})
	if err != nil {
		// A failed listing says nothing about the instances: keep the last view.
		if ctx.Err() == nil {
			f.log.Warn("provider listing failed; keeping the last view", "err", err)
		}
		return
	}
	_ = f.do(func(c *scaler.Scaler) { c.Observe(listing) })
	f.mu.Lock()
	close(f.listed)
	f.listed = make(chan struct{})
	f.mu.Unlock()
	f.settleRestored(cctx)
}

// Changed returns a channel closed at the next change of the fleet, such as
// a slot becoming free. Callers refused a booking wait on it.
func (f *Fleet) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// Reserve books a slot for key; see scaler.Scaler.Reserve.
func (f *Fleet) Reserve(key string) (err error) {
	if derr := f.do(func(c *scaler.Scaler) { err = c.Reserve(key) }); derr != nil {
		return derr
	}
	return err
}

// Queued reports how many jobs wait in the job source with no booking; see
// scaler.Scaler.Queued.
func (f *Fleet) Queued(n int) {
	f.do(func(c *scaler.Scaler) { c.Queued(n) })
}

// ArrivedAt tells the core when the job for key's booking arrived in its
// job source, so that its wait counts from there; see
// scaler.Scaler.ArrivedAt.
func (f *Fleet) ArrivedAt(key string, at time.Time) (err error) {
	if derr := f.do(func(c *scaler.Scaler) { err = c.ArrivedAt(key, at) }); derr != nil {
		return derr
	}
	return err
}

// Unreserve gives a booking back; see scaler.Scaler.Unreserve.
func (f *Fleet) Unreserve(key string) (err error) {
	if derr := f.do(func(c *scaler.Scaler) { err = c.Unreserve(key) }); derr != nil {
		return derr
	}
	return err
}

// Release ends an acquisition; see scaler.Scaler.Release. Releasing an
// acquisition whose instance was lost is not an error.
func (f *Fleet) Release(key string) (err error) {
	if derr := f.do(func(c *scaler.Scaler) {
		delete(f.lost, key)
		err = c.Release(key)
	}); derr != nil {
		return derr
	}
	if errors.Is(err, scaler.ErrUnknownKey) {
		return nil
	}
	return err
}

// Discard ends key's acquisition and deletes its instance, which takes no
// other job; see scaler.Scaler.Discard.
func (f *Fleet) Discard(key, why string) (err error) {
	if derr := f.do(func(c *scaler.Scaler) {
		delete(f.lost, key)
		err = c.Discard(key, why)
	}); derr != nil {
		return derr
	}
	if errors.Is(err, scaler.ErrUnknownKey) {
		return nil
	}
	return err
}

// Suspend parks key's acquisition as environment envKey; see scaler.Scaler.Suspend.
func (f *Fleet) Suspend(key, envKey string, state []byte) (err error) {
	if derr := f.do(func(c *scaler.Scaler) {
		delete(f.lost, key)
		err = c.Suspend(key, envKey, state)
	}); derr != nil {
		return derr
	}
	return err
}

// Acquire waits until key's booking has a slot on a ready instance, or ctx
// ends. On failure the booking is given back and the error says why.
func (f *Fleet) Acquire(ctx context.Context, key string) (Acquisition, error) {
	id, err := f.bound(ctx, key)
	if err != nil {
		return Acquisition{}, err
	}
	return f.connect(ctx, key, id, nil)
}

// bound waits until key's booking is bound to a slot on a ready instance,
// or ctx ends, and returns the instance.
func (f *Fleet) bound(ctx context.Context, key string) (string, error) {
	var (
		id  string
		ok  bool
		err error
		ch  chan result
	)
	if derr := f.do(func(c *scaler.Scaler) {
		id, ok, err = c.Acquire(key)
		if err == nil && !ok {
			ch = make(chan result, 1)
			f.waiters[key] = ch
		}
	}); derr != nil {
		return "", derr
	}
	if err != nil {
		return "", err
	}
	if !ok {
		r, werr := f.wait(ctx, key, ch)
		if werr != nil {
			return "", werr
		}
		id = r.id
	}
	return id, nil
}

// Resume resumes environment envKey for booking key and waits until it runs.
func (f *Fleet) Resume(ctx context.Context, envKey, key string) (Acquisition, error) {
	var (
		err error
		ch  = make(chan result, 1)
	)
	if derr := f.do(func(c *scaler.Scaler) {
		err = c.Resume(envKey, key)
		if err == nil {
			f.waiters[key] = ch
		}
	}); derr != nil {
		return Acquisition{}, derr
	}
	if err != nil {
		return Acquisition{}, err
	}
	r, err := f.wait(ctx, key, ch)
	if err != nil {
		return Acquisition{}, err
	}
	return f.connect(ctx, key, r.id, r.state)
}

func (f *Fleet) wait(ctx context.Context, key string, ch chan result) (result, error) {
	select {
	case r := <-ch:
		return r, r.err
	case <-ctx.Done():
	}
	var why string
	var r result
	var late bool
	if derr := f.do(func(c *scaler.Scaler) {
		delete(f.waiters, key)
		select {
		case r = <-ch: // bound at the last moment
			late = true
			return
		default:
		}
		why = c.Why(key)
		_ = c.Unreserve(key)
	}); derr != nil {
		return result{}, derr
	}
	if late {
		return r, r.err
	}
	return result{}, fmt.Errorf("no instance was ready for booking %s before the acquire timeout (%v): %s", key, context.Cause(ctx), why)
}

// Instances describes the fleet's instances.
func (f *Fleet) Instances() []scaler.InstanceView {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.core.Instances()
}

// Counts summarises the fleet for metrics.
func (f *Fleet) Counts() scaler.Counts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.core.Counts()
}

// DeleteIdle deletes every instance that holds no job or environment and
// waits for the provider calls, for delete_instances_on_shutdown. It stops
// scale-up first, for good: otherwise the next tick would refill the idle
// pool and leave an instance behind at exit. An increase that was in flight
// is waited for, listed, and its instances deleted too.
func (f *Fleet) DeleteIdle(ctx context.Context) {
	if f.do(func(c *scaler.Scaler) { c.Shutdown(scaler.ReasonShutdown) }) != nil {
		return // no longer the leader: the fleet is not this manager's to empty
	}
	f.waitCalls(ctx)
	if ctx.Err() != nil {
		return
	}
	// Instances created by an increase in flight appear only in a listing.
	f.update(ctx)
	f.do(func(c *scaler.Scaler) { c.DeleteAll(scaler.ReasonShutdown) })
	f.waitCalls(ctx)
}

// StopScaleUp stops all scale-up (boot and resume) for the rest of the
// process, when berth begins to stop; see scaler.Scaler.StopScaleUp.
func (f *Fleet) StopScaleUp() {
	f.do(func(c *scaler.Scaler) { c.StopScaleUp() })
}

// waitCalls waits for provider calls in flight, or ctx.
func (f *Fleet) waitCalls(ctx context.Context) { f.calls.wait(ctx) }

// RelieveParked lets a job that waits for want of any instance evict the
// environment parked longest; see scaler.Scaler.RelieveParked.
func (f *Fleet) RelieveParked() (evicted bool) {
	f.do(func(c *scaler.Scaler) { evicted = c.RelieveParked() })
	return evicted
}

// EnvLost returns why environment key was lost, or "" (Scaler.EnvLost).
func (f *Fleet) EnvLost(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.core.EnvLost(key)
}

// IncreaseError is why the provider could not create instances lately,
// "" once it created them again; see scaler.Scaler.IncreaseError.
// It does not take the fleet's lock (see incErr).
func (f *Fleet) IncreaseError() string {
	if e := f.incErr.Load(); e != nil {
		return *e
	}
	return ""
}

// EnvBusy reports whether environment key is being resumed by a job; see
// scaler.Scaler.EnvBusy. The job loop takes a job that resumes a key that is
// not busy without a new booking: the environment's own slot serves it.
func (f *Fleet) EnvBusy(key string) (busy bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.core.EnvBusy(key)
}

// Hold stops (true) or restarts (false) the idle pool: see
// scaler.Scaler.Hold.
func (f *Fleet) Hold(held bool) error {
	return f.do(func(c *scaler.Scaler) { c.Hold(held) })
}

// SetLimits applies a reloaded policy schedule and instance limits: see
// scaler.Scaler.SetLimits.
func (f *Fleet) SetLimits(policies scaler.Policies, maxInstances, maxUseCount int) error {
	return f.do(func(c *scaler.Scaler) { c.SetLimits(policies, maxInstances, maxUseCount) })
}

// Held reports whether the idle pool is held.
func (f *Fleet) Held() (held bool) {
	_ = f.do(func(c *scaler.Scaler) { held = c.Held() })
	return held
}

// DeleteInstances removes the instances ids names as an operator asked
// (scaler.Scaler.DeleteInstance): what became of each, in order. The
// decisions are saved before the provider is called, as for any other.
func (f *Fleet) DeleteInstances(ids []string, force bool) ([]scaler.DeleteResult, error) {
	out := make([]scaler.DeleteResult, 0, len(ids))
	err := f.do(func(c *scaler.Scaler) {
		out = out[:0]
		for _, id := range ids {
			outcome, why, err := c.DeleteInstance(id, force)
			r := scaler.DeleteResult{ID: id, Outcome: outcome, Why: why}
			if err != nil {
				r.Outcome, r.Why = "unknown", err.Error()
			}
			out = append(out, r)
		}
	})
	return out, err
}
