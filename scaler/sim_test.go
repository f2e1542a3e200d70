package scaler_test

// Deterministic simulation: the core drives provider/sim on a virtual clock,
// fed by a little job loop, for many seeds. Every step ends with a check of
// the invariants I1–I8 (docs/invariants.md) and of the core's own bookkeeping. A
// failure prints the seed; rerun one with -run 'TestSimulation/seed=N'.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/scaler"
)

var (
	simSeeds = flag.Int("sim.seeds", 0, "number of simulation seeds (default 200 with -short, 400 without)")
	simSteps = flag.Int("sim.steps", 0, "steps per simulation seed (default 300 with -short, 500 without)")
)

func TestSimulation(t *testing.T) {
	seeds, steps := 400, 500
	if testing.Short() {
		seeds, steps = 200, 300
	}
	if *simSeeds > 0 {
		seeds = *simSeeds
	}
	if *simSteps > 0 {
		steps = *simSteps
	}
	var total simTotals
	defer func() { total.report(t, seeds, steps) }()
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			w := newWorld(t, uint64(seed))
			defer total.add(w)
			for i := 0; i < steps; i++ {
				w.step(i)
				if t.Failed() {
					t.Logf("seed %d failed at step %d (%s); config %s", seed, i, w.now.Sub(epoch), w.desc)
					t.Logf("recent events:\n%s", strings.Join(w.log, "\n"))
					return
				}
			}
			w.drain()
		})
	}
}

type jobState int

const (
	jobBooked  jobState = iota // Reserve succeeded; asking the job source
	jobWaiting                 // job taken, waiting for Bound
	jobRunning
)

type job struct {
	key      string
	state    jobState
	inst     string
	until    time.Time
	deadline time.Time // acquire timeout
	resumes  string    // environment being resumed
	state0   []byte    // expected saved state on Bound
}

type parked struct {
	inst     string
	state    []byte
	parkedAt time.Time
	inUse    string // booking key that resumed it
}

type world struct {
	t    *testing.T
	rng  *rand.Rand
	now  time.Time
	prov *sim.Group
	cfg  scaler.Config
	scfg sim.Config
	s    *scaler.Scaler
	desc string

	store   []byte
	jobs    map[string]*job
	envs    map[string]*parked
	polls   []string // poll bookings in flight (sim_poll_test.go)
	seq     int
	hookErr float64 // probability that the ready hook fails
	hbErr   float64 // probability of an injected heartbeat failure

	// decreased lists instances the core asked to delete; killed ones the
	// test removed behind the core's back.
	decreased map[string]scaler.Reason
	killed    map[string]bool
	log       []string
	inCrash   bool

	// counters for the summary and for I2
	taken, done, lostByProvider, refused int
	// crashes counts injected manager crashes (each followed by a restart
	// from the store); midActions those that hit between persisting a
	// decision and carrying out all of its provider calls; storesLost those
	// that also lost the store.
	crashes, midActions, storesLost int
	// evictions counts parked environments given up for waiting jobs.
	evictions int
}

// simTotals adds up what the seeds of one run injected and saw, so that a
// run reports how many crashes its invariants survived.
type simTotals struct {
	worlds, crashes, midActions, storesLost, evictions, taken, done, lostByProvider, refused int
}

func (s *simTotals) add(w *world) {
	s.worlds++
	s.crashes += w.crashes
	s.midActions += w.midActions
	s.storesLost += w.storesLost
	s.evictions += w.evictions
	s.taken += w.taken
	s.done += w.done
	s.lostByProvider += w.lostByProvider
	s.refused += w.refused
}

func (s *simTotals) report(t *testing.T, seeds, steps int) {
	t.Logf("simulation: %d seeds × %d steps; injected %d manager crashes (%d between a saved decision and its provider calls, %d with the store lost); jobs taken %d, finished %d, lost by the provider %d; bookings refused %d; parked environments evicted for waiting jobs %d",
		s.worlds, steps, s.crashes, s.midActions, s.storesLost, s.taken, s.done, s.lostByProvider, s.refused, s.evictions)
}

func newWorld(t *testing.T, seed uint64) *world {
	rng := rand.New(rand.NewPCG(seed, 42))
	w := &world{t: t, rng: rng, now: epoch, jobs: map[string]*job{}, envs: map[string]*parked{},
		decreased: map[string]scaler.Reason{}, killed: map[string]bool{}}
	capacity := 1 + rng.IntN(3)
	maxInst := 2 + rng.IntN(6)
	pol := policy.Policy{
		IdleCount:  rng.IntN(3),
		IdleTime:   time.Duration(rng.IntN(4)) * time.Minute,
		Preemptive: rng.IntN(2) == 0,
	}
	if rng.IntN(3) == 0 {
		pol.ScaleFactor, pol.ScaleFactorLimit = 0.5, rng.IntN(4)
	}
	if rng.IntN(2) == 0 {
		// The suspended idle tier (it stays empty without CanSuspend),
		// sometimes sized by a wait target from the arrival forecast.
		pol.SuspendedIdleTime = time.Duration(1+rng.IntN(4)) * time.Minute
		pol.SuspendedIdleCount = rng.IntN(3)
		pol.TargetWait = []time.Duration{0, 15 * time.Second, time.Minute}[rng.IntN(3)]
	}
	w.cfg = scaler.Config{
		CapacityPerInstance: capacity,
		MaxInstances:        maxInst,
		MaxUseCount:         []int{0, 0, 2, 5}[rng.IntN(4)],
		Policies:            scaler.FixedPolicy(pol),
		ThrottleLimit:       []float64{0, 0.2, 1}[rng.IntN(3)],
		ThrottleBurst:       1 + rng.IntN(4),
		ReadyHook:           rng.IntN(3) == 0,
		ReadyTimeout:        5 * time.Minute,
		ListingTimeout:      5 * time.Minute,
		HeartbeatInterval:   []time.Duration{0, 30 * time.Second}[rng.IntN(2)],
		FailureThreshold:    1 + rng.IntN(3),
		CanSuspend:          rng.IntN(2) == 0,
		EnvTTL:              time.Duration(5+rng.IntN(30)) * time.Minute,
		DeleteUnknown:       rng.IntN(4) == 0,
		DeleteOnDeadJob:     rng.IntN(3) == 0,
	}
	if seed%3 == 0 {
		// Plain jobs may evict environments parked this long when parked
		// environments hold every instance. Taken from the seed, not the
		// random stream, so that every other choice of a seed stays the same.
		w.cfg.EnvEvictAfter = time.Duration(1+seed%7) * time.Minute
	}
	if rng.IntN(3) == 0 {
		// Alternate on-demand and preemptive periods every few minutes.
		other := pol
		other.Preemptive = !pol.Preemptive
		other.IdleCount = rng.IntN(3)
		sched, err := policy.NewSchedule([]policy.Period{
			{Periods: []string{"* * * * *"}, Policy: pol},
			{Periods: []string{"*/3 * * * *", "1-59/7 * * * *"}, Policy: other},
		})
		if err != nil {
			t.Fatal(err)
		}
		w.cfg.Policies = sched
	}
	if w.cfg.ReadyHook {
		w.hookErr = []float64{0, 0.2, 0.6}[rng.IntN(3)]
	}
	if w.cfg.HeartbeatInterval > 0 {
		w.hbErr = []float64{0, 0.1}[rng.IntN(2)]
	}
	w.scfg = sim.Config{
		BootTime:         time.Duration(rng.IntN(60)) * time.Second,
		BootJitter:       time.Duration(rng.IntN(30)) * time.Second,
		ListingLag:       time.Duration(rng.IntN(20)) * time.Second,
		IncreaseFailRate: []float64{0, 0, 0.2}[rng.IntN(3)],
		NeverReadyRate:   []float64{0, 0, 0.1}[rng.IntN(3)],
		SuspendLatency:   time.Duration(rng.IntN(20)) * time.Second,
		ResumeLatency:    time.Duration(rng.IntN(20)) * time.Second,
		DeleteLatency:    time.Duration(rng.IntN(20)) * time.Second,
		Seed:             seed,
		SupportsSuspend:  w.cfg.CanSuspend,
		ReportDeleted:    rng.IntN(2) == 0,
	}
	if rng.IntN(3) == 0 {
		w.scfg.Quota = 1 + rng.IntN(maxInst)
	}
	w.prov = sim.New(w.scfg, func() time.Time { return w.now })
	w.s = scaler.New(w.cfg, w.now)
	w.desc = fmt.Sprintf("core=%+v policy=%+v sim=%+v", w.cfg, pol, w.scfg)
	return w
}

func (w *world) logf(format string, a ...any) {
	w.log = append(w.log, fmt.Sprintf("%8s ", w.now.Sub(epoch))+fmt.Sprintf(format, a...))
	if len(w.log) > 60 {
		w.log = w.log[len(w.log)-60:]
	}
}

func (w *world) errorf(format string, a ...any) {
	w.t.Helper()
	w.t.Errorf("%s: "+format, append([]any{w.now.Sub(epoch)}, a...)...)
}

func (w *world) hasFailures() bool {
	return w.scfg.IncreaseFailRate > 0 || w.scfg.NeverReadyRate > 0 || w.scfg.Quota > 0 ||
		w.hookErr > 0 || w.hbErr > 0 || len(w.killed) > 0
}

// crashNow unwinds a step when the manager crashes in the middle of it.
type crashNow struct{}

// step is one tick of virtual time with random events.
func (w *world) step(i int) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crashNow); !ok {
				panic(r)
			}
			w.crash(false)
			w.check()
		}
	}()
	// Time moves by a random amount, or to the provider's next event.
	dt := time.Duration(w.rng.IntN(20)) * time.Second
	if next := w.prov.NextEventTime(); !next.IsZero() && next.After(w.now) && next.Sub(w.now) < dt {
		dt = next.Sub(w.now)
	}
	w.now = w.now.Add(dt)
	w.s.Advance(w.now)
	w.apply()

	if w.rng.IntN(10) < 8 {
		w.observe()
	}
	// Arrivals: a few job loops try to book.
	for n := w.rng.IntN(4); n > 0; n-- {
		w.arrive()
	}
	w.pollStep()
	if w.cfg.CanSuspend && w.rng.IntN(4) == 0 {
		w.resumeOne()
	}
	w.finishJobs()
	w.timeouts()
	if w.rng.IntN(10) == 0 {
		// The job source reports jobs it holds with no booking yet.
		w.s.Queued(w.rng.IntN(3))
		w.apply()
	}
	if w.rng.IntN(60) == 0 {
		w.kill()
	}
	w.s.Tick()
	w.apply()
	if w.rng.IntN(80) == 0 {
		w.crash(false)
	} else if w.rng.IntN(300) == 0 && w.allListed() {
		// The store is lost (a new state_dir): every instance is unknown and
		// must be adopted or deleted, never ignored (I4).
		w.crash(true)
	}
	w.check()
}

// drain stops arrivals and lets everything finish; every job must end.
func (w *world) drain() {
	w.inCrash = true // no more crashes: the drain checks liveness
	w.s.Queued(0)
	for i := 0; i < 400 && len(w.jobs) > 0; i++ {
		w.now = w.now.Add(10 * time.Second)
		w.s.Advance(w.now)
		w.observe()
		w.finishJobs()
		w.timeouts()
		w.s.Tick()
		w.apply()
		w.check()
		if w.t.Failed() {
			return
		}
	}
	if len(w.jobs) > 0 {
		var keys []string
		for k, j := range w.jobs {
			keys = append(keys, fmt.Sprintf("%s(state %d, why: %s)", k, j.state, w.s.Why(k)))
		}
		sort.Strings(keys)
		w.errorf("jobs never finished: %v", keys)
	}
}

func (w *world) observe() {
	var listing []scaler.Listed
	if err := w.prov.Update(context.Background(), func(id string, st provider.State) {
		listing = append(listing, scaler.Listed{ID: id, State: st})
	}); err != nil {
		w.t.Fatal(err)
	}
	w.s.Observe(listing)
	w.apply()
	// I4: after a reconcile every listed instance is accounted for.
	for _, l := range listing {
		if l.State == provider.StateDeleted {
			continue
		}
		if w.s.PhaseForTest(l.ID) == "" {
			w.errorf("I4: listed instance %s (%s) is not accounted for by the core", l.ID, l.State)
		}
	}
}

func (w *world) newKey() string {
	w.seq++
	return fmt.Sprintf("j%d", w.seq)
}

func (w *world) arrive() {
	k := w.newKey()
	if err := w.s.Reserve(k); err != nil {
		var nc *scaler.NoCapacityError
		if !errors.As(err, &nc) || !errors.Is(err, scaler.ErrNoCapacity) {
			w.errorf("Reserve(%s) failed with an untyped error: %v", k, err)
		}
		w.refused++
		// An arrival is a job known to wait, as with the built-in queue.
		w.s.RelieveParked()
		w.apply()
		return
	}
	w.logf("reserve %s", k)
	j := &job{key: k, state: jobBooked}
	w.jobs[k] = j
	w.apply()
	if w.rng.IntN(5) == 0 {
		// The job source had nothing: give the booking back.
		w.logf("unreserve %s", k)
		if err := w.s.Unreserve(k); err != nil {
			w.errorf("Unreserve(%s): %v", k, err)
		}
		delete(w.jobs, k)
		w.apply()
		return
	}
	w.take(j)
}

// take takes a job against booking j (I1: only after Reserve succeeded).
func (w *world) take(j *job) {
	if _, booked := w.jobs[j.key]; !booked {
		w.errorf("I1: job taken for %s without a booking", j.key)
	}
	w.taken++
	j.state = jobWaiting
	j.deadline = w.now.Add(15 * time.Minute)
	id, ok, err := w.s.Acquire(j.key)
	if err != nil {
		// The booking may have been lost to a provider failure just now.
		w.errorf("Acquire(%s) after a successful Reserve: %v", j.key, err)
		return
	}
	if ok {
		w.run(j, id)
	}
	w.apply()
}

func (w *world) run(j *job, id string) {
	// No booking lands on an instance that is not running: in particular
	// never on one of the suspended tier before its resume completed.
	for _, in := range w.prov.Instances() {
		if in.ID == id && in.State != provider.StateRunning {
			w.errorf("%s bound to %s, which the provider has %s", j.key, id, in.State)
		}
	}
	j.state, j.inst = jobRunning, id
	j.until = w.now.Add(time.Duration(5+w.rng.IntN(240)) * time.Second)
	w.logf("run %s on %s", j.key, id)
}

func (w *world) resumeOne() {
	var keys []string
	for k, p := range w.envs {
		if p.inUse == "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return
	}
	sort.Strings(keys)
	ek := keys[w.rng.IntN(len(keys))]
	p := w.envs[ek]
	k := w.newKey()
	err := w.s.Resume(ek, k)
	var lost *scaler.EnvLostError
	switch {
	case err == nil:
		w.logf("resume %s as %s", ek, k)
		p.inUse = k
		j := &job{key: k, state: jobWaiting, resumes: ek, state0: p.state, deadline: w.now.Add(15 * time.Minute)}
		w.jobs[k] = j
		w.taken++
		// The fleet carries out the actions of every call before the next
		// one, so a check of this call's decisions sees only this call.
		w.apply()
	case errors.As(err, &lost) && strings.Contains(lost.Reason, "evicted") && w.cfg.EnvEvictAfter > 0:
		// Evicted in this step by a refused booking; the EnvEvicted action,
		// carried out at the end of the step, checks the eviction.
	case errors.As(err, &lost):
		// I6: only an environment whose instance really went may be lost.
		if !w.killed[p.inst] && w.decreased[p.inst] == "" {
			w.errorf("I6: environment %s reported lost (%v) but its instance %s was neither killed nor deleted", ek, err, p.inst)
		}
		delete(w.envs, ek)
	case errors.Is(err, scaler.ErrUnknownEnv):
		if w.now.Sub(p.parkedAt) < w.cfg.EnvTTL {
			w.errorf("I6: environment %s vanished %s after parking (ttl %s)", ek, w.now.Sub(p.parkedAt), w.cfg.EnvTTL)
		}
		delete(w.envs, ek)
	default:
		w.errorf("Resume(%s): %v", ek, err)
	}
	w.apply()
}

func (w *world) finishJobs() {
	var keys []string
	for k, j := range w.jobs {
		if j.state == jobRunning && !w.now.Before(j.until) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		j := w.jobs[k]
		if j == nil {
			continue // lost during this loop
		}
		if w.cfg.CanSuspend && w.rng.IntN(3) == 0 {
			ek := "env-" + k
			st := []byte("state of " + k)
			err := w.s.Suspend(k, ek, st)
			if err == nil {
				w.logf("suspend %s as %s on %s", k, ek, j.inst)
				if j.resumes != "" {
					delete(w.envs, j.resumes)
				}
				w.envs[ek] = &parked{inst: j.inst, state: st, parkedAt: w.now}
				delete(w.jobs, k)
				w.done++
				w.apply()
				continue
			}
			if !errors.Is(err, scaler.ErrEnvSlotTaken) {
				w.errorf("Suspend(%s): %v", k, err)
			}
		}
		w.logf("release %s on %s", k, j.inst)
		if err := w.s.Release(k); err != nil {
			w.errorf("Release(%s): %v", k, err)
		}
		if j.resumes != "" {
			delete(w.envs, j.resumes) // the environment is consumed
		}
		delete(w.jobs, k)
		w.done++
		w.apply() // as the fleet does after every call
		w.apply()
	}
}

// timeouts ends acquisitions that waited longer than the acquire timeout.
// With a perfect cloud that would be a failure of capacity accounting (I2).
func (w *world) timeouts() {
	var keys []string
	for k, j := range w.jobs {
		if j.state == jobWaiting && !w.now.Before(j.deadline) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		j := w.jobs[k]
		why := w.s.Why(k)
		if !w.hasFailures() {
			w.errorf("I2: job %s timed out waiting for a slot with a perfect cloud: %s", k, why)
		}
		w.logf("acquire timeout %s: %s", k, why)
		if err := w.s.Release(k); err != nil {
			w.errorf("Release(%s) after timeout: %v", k, err)
		}
		if j.resumes != "" {
			if p := w.envs[j.resumes]; p != nil {
				p.inUse = ""
			}
		}
		delete(w.jobs, k)
		w.apply()
	}
}

func (w *world) kill() {
	insts := w.prov.Instances()
	if len(insts) == 0 {
		return
	}
	in := insts[w.rng.IntN(len(insts))]
	w.logf("kill %s (%s)", in.ID, in.State)
	w.killed[in.ID] = true
	if err := w.prov.Kill(in.ID); err != nil {
		w.t.Fatal(err)
	}
}

// crash kills the manager: jobs die with it; only the store survives. At
// times the crash comes after the state was persisted but before all of the
// provider calls it announced were made.
func (w *world) allListed() bool {
	for _, in := range w.prov.Instances() {
		if !in.Listed {
			return false
		}
	}
	return true
}

func (w *world) crash(storeLost bool) {
	w.crashes++
	if storeLost {
		w.storesLost++
	}
	w.inCrash = true
	defer func() { w.inCrash = false }()
	var st scaler.State // nothing persisted yet: a first start
	if storeLost {
		w.logf("store lost")
		w.envs = map[string]*parked{} // nobody can know them any more
	} else if len(w.store) > 0 {
		if err := json.Unmarshal(w.store, &st); err != nil {
			w.t.Fatal(err)
		}
	}
	w.logf("crash + restart")
	s, dead, err := scaler.Restore(w.cfg, st, w.now)
	if err != nil {
		w.errorf("Restore: %v", err)
		return
	}
	for _, d := range dead {
		// Not necessarily running: a crash may have come before its Bound
		// was delivered.
		if w.jobs[d.Key] == nil {
			w.errorf("Restore reported dead job %s on %s that was never booked", d.Key, d.InstanceID)
		}
	}
	w.s = s
	w.jobs = map[string]*job{}
	w.polls = nil // a poll does not survive its process
	for _, p := range w.envs {
		p.inUse = "" // its job died; the environment stays parked
	}
	// I6: every parked environment survives the restart.
	have := map[string]bool{}
	for _, k := range s.Environments() {
		have[k] = true
	}
	for k, p := range w.envs {
		if !have[k] && w.now.Sub(p.parkedAt) < w.cfg.EnvTTL {
			w.errorf("I6: environment %s lost by the restart", k)
		}
	}
	// The first thing a restarted manager does is reconcile (I4 is checked there).
	w.observe()
}

// apply carries out the core's actions as the manager would: persist the
// state first, then make the provider calls and report their results.
func (w *world) apply() {
	for round := 0; round < 100; round++ {
		acts, dirty := w.s.Ready()
		if dirty {
			b, err := json.Marshal(w.s.State())
			if err != nil {
				w.t.Fatal(err)
			}
			w.store = b
		}
		if len(acts) == 0 {
			return
		}
		// I7: a scale-up never provisions beyond demand + idle target, both
		// recomputed from scratch rather than from the core's counters.
		// Parked environments resumed by jobs in this batch are no scaling
		// decision: judge the scale-up without them.
		resumed := map[string]bool{}
		pooled := w.s.PooledForTest()
		for _, a := range acts {
			if r, ok := a.(scaler.Resume); ok {
				if _, tier := pooled[r.ID]; !tier {
					resumed[r.ID] = true
				}
			}
		}
		for _, a := range acts {
			if inc, ok := a.(scaler.Increase); ok {
				if rc := w.s.RecountWithoutForTest(resumed); rc.Have > rc.Desired {
					w.errorf("I7: increase %d leaves %d instances, demand %d + idle %d needs %d", inc.N, rc.Have, rc.InUse, rc.IdleTarget, rc.Desired)
				}
				if inc.N > w.cfg.ThrottleBurst && w.cfg.ThrottleBurst > 0 {
					w.errorf("I7: increase %d beyond the throttle burst %d", inc.N, w.cfg.ThrottleBurst)
				}
			}
		}
		if !w.inCrash && w.rng.IntN(150) == 0 {
			// Crash after persisting but before every announced provider
			// call was made: the rest of the actions are never carried out.
			cut := w.rng.IntN(len(acts) + 1)
			for _, a := range acts[:cut] {
				w.act(a)
			}
			w.logf("crash after %d of %d actions", cut, len(acts))
			w.midActions++
			panic(crashNow{}) // unwinds the job loop that was running; see step
		}
		for _, a := range acts {
			w.act(a)
		}
		w.check()
	}
	w.errorf("the core keeps emitting actions")
}

var failureReasons = map[scaler.Reason]bool{
	scaler.ReasonHeartbeat: true, scaler.ReasonReadyHook: true, scaler.ReasonNotReady: true,
	scaler.ReasonProviderTimeout: true, scaler.ReasonSuspendFailed: true,
	scaler.ReasonRemovedByProvider: true, scaler.ReasonDeadJob: true,
}

func (w *world) act(a scaler.Action) {
	ctx := context.Background()
	w.logf("action %s", fmtAction(a))
	if d, ok := a.(scaler.Decrease); ok {
		w.logf("  phase of %s: %s", d.ID, w.s.PhaseForTest(d.ID))
	}
	switch a := a.(type) {
	case scaler.Increase:
		n, err := w.prov.Increase(ctx, a.N)
		w.s.IncreaseResult(a.N, n, err)
		// I3 at the moment instances are created.
		if live := len(w.prov.Instances()); live > w.cfg.MaxInstances {
			w.errorf("I3: %d instances exist, max_instances is %d", live, w.cfg.MaxInstances)
		}
	case scaler.Decrease:
		if a.Reason == "" {
			w.errorf("I8: Decrease of %s has no reason", a.ID)
		}
		if !failureReasons[a.Reason] {
			if held := w.s.HeldSlotsForTest(a.ID); len(held) > 0 {
				w.errorf("I5: Decrease of %s (%s) while it holds %v", a.ID, a.Reason, held)
			}
		}
		w.decreased[a.ID] = a.Reason
		ids, err := w.prov.Decrease(ctx, []string{a.ID})
		w.s.DecreaseResult(ids, err)
	case scaler.Suspend:
		_, err := w.prov.Suspend(ctx, []string{a.ID})
		w.s.SuspendResult(a.ID, err)
	case scaler.Resume:
		_, err := w.prov.Resume(ctx, []string{a.ID})
		w.s.ResumeResult(a.ID, err)
	case scaler.RunReadyHook:
		var err error
		if w.rng.Float64() < w.hookErr {
			err = errors.New("ready command exited 1")
		}
		w.s.HookResult(a.ID, err)
	case scaler.Heartbeat:
		err := w.prov.Heartbeat(ctx, a.ID)
		if err == nil && w.rng.Float64() < w.hbErr {
			err = errors.New("injected: ssh handshake timed out")
		}
		w.s.HeartbeatResult(a.ID, err)
	case scaler.Bound:
		j := w.jobs[a.Key]
		if j == nil || j.state != jobWaiting {
			w.errorf("I1: Bound for %s which no taken job waits for", a.Key)
			return
		}
		if j.resumes != "" && string(a.State) != string(j.state0) {
			w.errorf("resumed %s with state %q, want %q", j.resumes, a.State, j.state0)
		}
		w.run(j, a.InstanceID)
	case scaler.Failed:
		j := w.jobs[a.Key]
		if j == nil {
			w.errorf("Failed for unknown booking %s: %v", a.Key, a.Err)
			return
		}
		// I2: a failure must come from the provider, with its reason.
		var il *scaler.InstanceLostError
		if !errors.As(a.Err, &il) && !strings.Contains(a.Err.Error(), "resume instance") {
			w.errorf("I2: %s failed for a reason that is not a provider failure: %v", a.Key, a.Err)
		}
		w.lostByProvider++
		if j.resumes != "" {
			delete(w.envs, j.resumes)
		}
		delete(w.jobs, a.Key)
	case scaler.Lost:
		j := w.jobs[a.Key]
		if j == nil {
			w.errorf("Lost for unknown booking %s", a.Key)
			return
		}
		if a.Reason == "" {
			w.errorf("I2: %s lost without a reason", a.Key)
		}
		w.lostByProvider++
		if j.resumes != "" {
			delete(w.envs, j.resumes)
		}
		delete(w.jobs, a.Key)
	case scaler.EnvEvicted:
		p := w.envs[a.Key]
		switch {
		case p == nil:
			w.errorf("evicted environment %s that no job parked (or that is gone already)", a.Key)
		case p.inUse != "":
			w.errorf("evicted environment %s while job %s resumes it", a.Key, p.inUse)
		case w.cfg.EnvEvictAfter <= 0 || w.now.Sub(p.parkedAt) < w.cfg.EnvEvictAfter:
			w.errorf("evicted environment %s parked %s ago (environment_evict_after %s)", a.Key, w.now.Sub(p.parkedAt), w.cfg.EnvEvictAfter)
		case a.Why == "":
			w.errorf("I8: environment %s evicted without a reason", a.Key)
		}
		w.evictions++
		delete(w.envs, a.Key)
	case scaler.Gone:
		if a.Reason == "" {
			w.errorf("I8: %s gone without a reason", a.ID)
		}
	case scaler.Scaled:
		if a.Direction == "up" && a.Have+a.N > a.Want {
			w.errorf("I7: scaled up to %d+%d beyond the %d wanted", a.Have, a.N, a.Want)
		}
	}
}

// check runs the invariants that hold after every step.
func (w *world) check() {
	if err := w.s.CheckForTest(); err != nil {
		w.errorf("%v", err)
	}
	// The suspended idle tier belongs to nobody: its instances never hold
	// an environment or a booking, and are suspending or suspended.
	for id, d := range w.s.PooledForTest() {
		if d != "suspending" && d != "suspended" {
			w.errorf("tier instance %s is %s", id, d)
		}
	}
	// I3: the provider never holds more than max_instances.
	if live := len(w.prov.Instances()); live > w.cfg.MaxInstances {
		w.errorf("I3: %d instances exist, max_instances is %d", live, w.cfg.MaxInstances)
	}
	if w.s.Total() > w.cfg.MaxInstances {
		w.errorf("I3: the core counts %d instances, max_instances is %d", w.s.Total(), w.cfg.MaxInstances)
	}
	// I6: parked environments are known to the core.
	for k, p := range w.envs {
		inst, lost, _, ok := w.s.EnvForTest(k)
		if !ok {
			if w.now.Sub(p.parkedAt) < w.cfg.EnvTTL {
				w.errorf("I6: environment %s is gone %s after parking", k, w.now.Sub(p.parkedAt))
			}
			continue
		}
		// A lost environment is checked when a Resume reports it (resumeOne):
		// by then the deletion that lost it has been carried out.
		_, _ = inst, lost
	}
}
