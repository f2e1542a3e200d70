package scaler_test

// Deterministic simulation of two managers sharing one fleet through a
// fenced store, as with [ha] on etcd (package ha, fleet's fencing). Each
// manager owns a core while it leads; the shared store holds the durable
// state and the lease, and refuses a save whose fence (the term it was won
// with) is not the current one. The leader is paused at random (a SIGSTOP,
// a GC pause: its goroutines stop between a save and the provider call it
// announced, or between the call and its result) or cut off from the store
// (a partition: it cannot save, renew its lease or confirm it leads, but
// still reaches the provider). The standby takes over once the lease
// expired: it restores the shared state (scaler.Restore and the restart
// rules) and reconciles it with the provider's listing. The old leader then
// wakes and tries to go on.
//
// Checked after every step and every provider call: no manager calls the
// provider unless it holds the current term (in particular none after the
// new leader's first save), so no instance is created twice for one intent;
// the provider never holds more than max_instances; the leader's core is
// consistent. At the end every job taken has ended, finished or failed with
// a reason. Run: go test ./scaler -run TestHASimulation -sim.seeds=N; rerun
// a failure with -run 'TestHASimulation/seed=N'.
//
// What the model takes as given: the check "do I still lead?" right before
// a provider call and the call itself are one step (fleet.confirm then the
// call; a pause exactly between the two is the window the provider cannot
// fence, docs/ha.md), and a proof of leadership is fresh only within the
// step that made it (ha.ConfirmAfter, 250 ms, is far below a step).

import (
	"context"
	"encoding/json"
	"errors"
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

// haTTL is the lease: a leader that renewed it last at t leads until t+haTTL.
const haTTL = 10 * time.Second

func TestHASimulation(t *testing.T) {
	seeds, steps := 300, 400
	if testing.Short() {
		seeds, steps = 100, 300
	}
	if *simSeeds > 0 {
		seeds = *simSeeds
	}
	if *simSteps > 0 {
		steps = *simSteps
	}
	var total haTotals
	defer func() { total.report(t, seeds, steps) }()
	for seed := 1; seed <= seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			w := newHAWorld(t, uint64(seed))
			defer total.add(w)
			for i := 0; i < steps && !t.Failed(); i++ {
				w.step(true)
			}
			if !t.Failed() {
				w.drain()
			}
			if t.Failed() {
				t.Logf("seed %d; config %s", seed, w.desc)
				t.Logf("recent events:\n%s", strings.Join(w.log, "\n"))
			}
		})
	}
}

// haStore is the coordination store: the durable state, the current term
// and its lease.
type haStore struct {
	term       int       // bumped by every takeover, like the election key's revision
	leader     *haMgr    // the holder of term
	leaseUntil time.Time // etcd expires the leader's lease then
	state      []byte    // the last committed save
	savedTerm  int       // the term of the last committed save
}

// haMgr is one manager process.
type haMgr struct {
	name string
	core *scaler.Scaler // nil while standby or after it stopped
	term int            // the term it won (its fence)
	// renewed is when etcd last acknowledged its keepalive; skew is how
	// much later than the lease's real end its client notices (the client
	// measures from the answer and checks every 500 ms).
	renewed time.Time
	skew    time.Duration
	proof   time.Time // its last fenced save or confirmation
	calls   []*haCall // provider calls in flight (goroutines)
	// pausedUntil freezes the whole process (SIGSTOP); cutUntil cuts it off
	// from the store only (partition).
	pausedUntil, cutUntil time.Time
}

// haCall is a provider call in its goroutine: not made yet, or made with
// its result not yet fed to the core.
type haCall struct {
	a      scaler.Action
	made   bool
	report func() // feeds the result to the core
	saved  time.Time
}

type haJob struct {
	key   string
	by    *haMgr
	term  int
	state jobState
	inst  string
	until time.Time
	since time.Time
	ended string // "" while live; "finished" or "failed: reason"
}

type haWorld struct {
	t    *testing.T
	rng  *rand.Rand
	now  time.Time
	prov *sim.Group
	cfg  scaler.Config
	desc string

	store  haStore
	mgrs   []*haMgr
	queue  []string // jobs waiting in the shared queue
	jobs   map[string]*haJob
	seq    int
	log    []string
	noFail bool // the drain: no more pauses or partitions

	// what a run injected and saw
	takeovers, pauses, cuts, delayedBeforeCall, delayedBeforeResult                       int
	refusedSaves, refusedCalls, heldCalls, callsMade, jobsTaken, jobsFinished, jobsFailed int
}

type haTotals struct {
	worlds, takeovers, pauses, cuts, delayedBeforeCall, delayedBeforeResult               int
	refusedSaves, refusedCalls, heldCalls, callsMade, jobsTaken, jobsFinished, jobsFailed int
}

func (s *haTotals) add(w *haWorld) {
	s.worlds++
	s.takeovers += w.takeovers
	s.pauses += w.pauses
	s.cuts += w.cuts
	s.delayedBeforeCall += w.delayedBeforeCall
	s.delayedBeforeResult += w.delayedBeforeResult
	s.refusedSaves += w.refusedSaves
	s.refusedCalls += w.refusedCalls
	s.heldCalls += w.heldCalls
	s.callsMade += w.callsMade
	s.jobsTaken += w.jobsTaken
	s.jobsFinished += w.jobsFinished
	s.jobsFailed += w.jobsFailed
}

func (s *haTotals) report(t *testing.T, seeds, steps int) {
	t.Logf("HA simulation: %d seeds × %d steps; %d takeovers; leader paused %d times, cut off from the store %d times; "+
		"goroutines delayed between save and call %d, between call and result %d; saves refused by the fence %d, "+
		"calls refused (no longer leading) %d, held (could not confirm) %d, made %d; jobs taken %d, finished %d, failed with a reason %d",
		s.worlds, steps, s.takeovers, s.pauses, s.cuts, s.delayedBeforeCall, s.delayedBeforeResult, s.refusedSaves,
		s.refusedCalls, s.heldCalls, s.callsMade, s.jobsTaken, s.jobsFinished, s.jobsFailed)
}

func newHAWorld(t *testing.T, seed uint64) *haWorld {
	rng := rand.New(rand.NewPCG(seed, 21))
	w := &haWorld{t: t, rng: rng, now: epoch, jobs: map[string]*haJob{}}
	pol := policy.Policy{IdleCount: rng.IntN(3), IdleTime: time.Duration(rng.IntN(4)) * time.Minute, Preemptive: rng.IntN(2) == 0}
	w.cfg = scaler.Config{
		CapacityPerInstance: 1 + rng.IntN(3),
		MaxInstances:        2 + rng.IntN(6),
		MaxUseCount:         []int{0, 0, 3}[rng.IntN(3)],
		Policies:            scaler.FixedPolicy(pol),
		ReadyTimeout:        5 * time.Minute,
		ListingTimeout:      5 * time.Minute,
		HeartbeatInterval:   []time.Duration{0, 30 * time.Second}[rng.IntN(2)],
		FailureThreshold:    3,
		DeleteUnknown:       rng.IntN(3) == 0,
		DeleteOnDeadJob:     rng.IntN(3) == 0,
	}
	scfg := sim.Config{
		BootTime:      time.Duration(rng.IntN(60)) * time.Second,
		ListingLag:    time.Duration(rng.IntN(20)) * time.Second,
		DeleteLatency: time.Duration(rng.IntN(20)) * time.Second,
		ReportDeleted: rng.IntN(2) == 0,
		Seed:          seed,
	}
	w.prov = sim.New(scfg, func() time.Time { return w.now })
	w.mgrs = []*haMgr{{name: "A"}, {name: "B"}}
	w.desc = fmt.Sprintf("core=%+v policy=%+v sim=%+v", w.cfg, pol, scfg)
	w.takeOver(w.mgrs[0]) // A leads first, from an empty store
	return w
}

func (w *haWorld) logf(format string, a ...any) {
	w.log = append(w.log, fmt.Sprintf("%8s ", w.now.Sub(epoch))+fmt.Sprintf(format, a...))
	if len(w.log) > 80 {
		w.log = w.log[len(w.log)-80:]
	}
}

func (w *haWorld) errorf(format string, a ...any) {
	w.t.Helper()
	w.t.Errorf("%s: "+format, append([]any{w.now.Sub(epoch)}, a...)...)
}

func (w *haWorld) paused(m *haMgr) bool { return w.now.Before(m.pausedUntil) }
func (w *haWorld) cut(m *haMgr) bool    { return w.now.Before(m.cutUntil) }

// step is one tick of virtual time: each manager that runs does its part,
// in a random order, and faults are injected into the leader.
func (w *haWorld) step(arrivals bool) {
	w.now = w.now.Add(time.Duration(1+w.rng.IntN(8)) * time.Second)
	if arrivals {
		// About one job every 20 s: the fleet keeps up between faults.
		if w.rng.IntN(5) == 0 {
			w.seq++
			w.queue = append(w.queue, fmt.Sprintf("j%d", w.seq))
		}
	}
	order := w.rng.Perm(len(w.mgrs))
	for _, i := range order {
		m := w.mgrs[i]
		if w.paused(m) {
			continue
		}
		if m.core == nil {
			w.standby(m)
			continue
		}
		w.lead(m)
		if t := w.t; t.Failed() {
			return
		}
	}
	if !w.noFail {
		w.injectFaults()
	}
	w.check()
}

// injectFaults pauses the leader or cuts it off from the store, at times
// for longer than its lease.
func (w *haWorld) injectFaults() {
	m := w.store.leader
	if m == nil || m.core == nil || w.paused(m) {
		return
	}
	switch r := w.rng.IntN(100); {
	case r < 4:
		d := time.Duration(1+w.rng.IntN(40)) * time.Second
		m.pausedUntil = w.now.Add(d)
		w.pauses++
		w.logf("%s paused for %s with %d calls in flight", m.name, d, len(m.calls))
	case r < 6:
		d := time.Duration(1+w.rng.IntN(30)) * time.Second
		m.cutUntil = w.now.Add(d)
		w.cuts++
		w.logf("%s cut off from the store for %s", m.name, d)
	}
}

// standby takes over once the leader's lease expired.
func (w *haWorld) standby(m *haMgr) {
	if w.cut(m) || w.now.Before(w.store.leaseUntil) {
		return
	}
	w.takeOver(m)
}

// takeOver makes m the leader of a new term: it restores the shared state
// and reconciles it with the provider's listing; the jobs of the earlier
// terms that had not ended fail with that reason, as the restart rules
// fail a job that died with its manager.
func (w *haWorld) takeOver(m *haMgr) {
	s := &w.store
	s.term++
	s.leader = m
	s.leaseUntil = w.now.Add(haTTL)
	m.term, m.renewed, m.skew, m.proof = s.term, w.now, time.Duration(w.rng.IntN(1500))*time.Millisecond, time.Time{}
	m.calls = nil
	var st scaler.State
	if len(s.state) > 0 {
		if err := json.Unmarshal(s.state, &st); err != nil {
			w.t.Fatal(err)
		}
	}
	core, dead, err := scaler.Restore(w.cfg, st, w.now)
	if err != nil {
		w.errorf("%s: Restore: %v", m.name, err)
		return
	}
	m.core = core
	if s.term > 1 {
		w.takeovers++
	}
	w.logf("%s takes over (term %d): %d instances, %d bookings in the shared state, %d dead jobs", m.name, s.term, len(st.Instances), len(st.Reservations), len(dead))
	for _, d := range dead {
		if w.jobs[d.Key] == nil {
			w.errorf("Restore reported dead job %s that was never taken", d.Key)
		}
	}
	for _, j := range w.sortedJobs() {
		if j.ended == "" && j.term < s.term {
			w.end(j, "failed: its manager lost the lead while the job ran")
		}
	}
	w.observe(m)
}

// lead runs one step of the leader's job loop and fleet. After a pause,
// the goroutines, the job loop and the lease keepalive race: any of them
// may run first, so a stale leader meets the fence at a call, at a save or
// at its keepalive.
func (w *haWorld) lead(m *haMgr) {
	renewAt := w.rng.IntN(3)
	if renewAt == 0 {
		w.renew(m)
	}
	w.runCalls(m)
	if renewAt == 1 {
		w.renew(m)
	}
	w.observe(m)
	if m.core != nil {
		// The built-in queue tells the core how many jobs wait unbooked.
		m.core.Queued(len(w.queue))
		w.flush(m)
	}
	w.takeJobs(m)
	w.finishJobs(m)
	if m.core != nil {
		m.core.Tick()
		w.flush(m)
		w.runCalls(m)
	}
	if renewAt == 2 {
		w.renew(m)
	}
}

// renew is the lease keepalive: answered while etcd still holds the lease;
// once etcd expired it, the client learns the lease is gone and the term ends.
func (w *haWorld) renew(m *haMgr) {
	if m.core == nil || w.cut(m) {
		return
	}
	if w.store.leader == m && w.store.term == m.term && w.now.Before(w.store.leaseUntil) {
		m.renewed = w.now
		w.store.leaseUntil = w.now.Add(haTTL)
		return
	}
	w.stop(m, "its lease is gone (keepalive refused)")
}

// stop ends m's term for good, as the fleet does after a fenced save: its
// core and its calls not made are dropped; it is a standby from now on.
func (w *haWorld) stop(m *haMgr, why string) {
	w.logf("%s stops acting: %s; %d calls in flight dropped", m.name, why, len(m.calls))
	m.core, m.calls = nil, nil
}

// fencedWrite is a write to the store under m's fence: refused once
// another term began; it fails without a refusal while m is cut off.
func (w *haWorld) fencedWrite(m *haMgr) (ok, fenced bool) {
	if !w.now.Before(m.renewed.Add(haTTL + m.skew)) {
		return false, true // its own term ended (ha.ErrNotLeader)
	}
	if w.cut(m) {
		return false, false
	}
	if w.store.term != m.term {
		w.refusedSaves++
		return false, true // etcd refuses the compare (ha.ErrFenced)
	}
	m.proof = w.now
	return true, false
}

// save persists m's core state through the fence.
func (w *haWorld) save(m *haMgr) (ok, fenced bool) {
	if ok, fenced := w.fencedWrite(m); !ok {
		return false, fenced
	}
	b, err := json.Marshal(m.core.State())
	if err != nil {
		w.t.Fatal(err)
	}
	w.store.state, w.store.savedTerm = b, m.term
	return true, false
}

// confirm is fleet.confirm with ha.Store.Leading, right before a call:
// go on, hold (cannot tell), or stop.
func (w *haWorld) confirm(m *haMgr) (ok, stop bool) {
	switch {
	case !w.now.Before(m.renewed.Add(haTTL + m.skew)):
		return false, true
	case m.proof.Equal(w.now):
		return true, false // proved within ha.ConfirmAfter
	case w.cut(m):
		return false, false
	case w.store.term != m.term:
		return false, true
	}
	m.proof = w.now
	return true, false
}

// flush is fleet.flushLocked: save, then hand the actions to goroutines.
func (w *haWorld) flush(m *haMgr) {
	for round := 0; m.core != nil && m.core.HasReady(); round++ {
		if round > 100 {
			w.errorf("the core keeps emitting actions")
			return
		}
		acts, dirty := m.core.Ready()
		saved := true
		if dirty {
			ok, fenced := w.save(m)
			if fenced {
				w.stop(m, "its save was refused by the fence")
				return
			}
			saved = ok
		}
		for _, a := range acts {
			w.dispatch(m, a, saved)
		}
	}
}

func (w *haWorld) dispatch(m *haMgr, a scaler.Action, saved bool) {
	switch a := a.(type) {
	case scaler.Increase:
		if !saved {
			m.core.IncreaseResult(a.N, 0, errors.New("state not saved"))
			return
		}
		m.calls = append(m.calls, &haCall{a: a, saved: w.now})
	case scaler.Decrease, scaler.Heartbeat, scaler.RunReadyHook:
		m.calls = append(m.calls, &haCall{a: a, saved: w.now})
	case scaler.Bound:
		if j := w.jobs[a.Key]; j != nil && j.ended == "" && j.by == m && j.term == m.term {
			j.state, j.inst, j.until = jobRunning, a.InstanceID, w.now.Add(time.Duration(5+w.rng.IntN(120))*time.Second)
		}
	case scaler.Failed:
		if j := w.jobs[a.Key]; j != nil && j.ended == "" {
			w.end(j, "failed: "+a.Err.Error())
		}
	case scaler.Lost:
		if j := w.jobs[a.Key]; j != nil && j.ended == "" {
			w.end(j, "failed: "+a.Reason)
		}
	}
}

// runCalls advances m's goroutines: each may be delayed (a GC pause, a
// slow scheduler) before its call or before its result.
func (w *haWorld) runCalls(m *haMgr) {
	for len(m.calls) > 0 && m.core != nil && !w.paused(m) {
		var kept []*haCall
		calls := m.calls
		m.calls = nil
		for i, c := range calls {
			if m.core == nil {
				return
			}
			if !w.noFail && w.rng.IntN(8) == 0 {
				if c.made {
					w.delayedBeforeResult++
				} else {
					w.delayedBeforeCall++
				}
				kept = append(kept, c)
				continue
			}
			if !c.made {
				ok, stop := w.confirm(m)
				if stop {
					w.refusedCalls++
					w.stop(m, fmt.Sprintf("no longer leading before %s", fmtAction(c.a)))
					return
				}
				if !ok {
					w.heldCalls++
					kept = append(kept, calls[i:]...)
					break
				}
				w.call(m, c)
				if !w.noFail && w.rng.IntN(8) == 0 {
					w.delayedBeforeResult++
					kept = append(kept, c)
					continue
				}
			}
			c.report()
			w.flush(m)
		}
		if m.core == nil {
			return
		}
		m.calls = append(kept, m.calls...)
		if len(m.calls) == len(kept) {
			return // only delayed or held calls remain
		}
	}
}

// call makes the provider call of c; the invariants of who may call are
// checked here.
func (w *haWorld) call(m *haMgr, c *haCall) {
	s := &w.store
	if m.term != s.term || s.leader != m {
		w.errorf("%s (term %d) calls the provider (%s) while %s leads term %d", m.name, m.term, fmtAction(c.a), s.leader.name, s.term)
	}
	if s.savedTerm > m.term {
		w.errorf("%s calls the provider (%s) after the first save of term %d", m.name, fmtAction(c.a), s.savedTerm)
	}
	c.made = true
	w.callsMade++
	ctx := context.Background()
	w.logf("%s: %s (saved at %s)", m.name, fmtAction(c.a), c.saved.Sub(epoch))
	switch a := c.a.(type) {
	case scaler.Increase:
		n, err := w.prov.Increase(ctx, a.N)
		c.report = func() { m.core.IncreaseResult(a.N, n, err) }
	case scaler.Decrease:
		ids, err := w.prov.Decrease(ctx, []string{a.ID})
		c.report = func() { m.core.DecreaseResult(ids, err) }
	case scaler.Heartbeat:
		err := w.prov.Heartbeat(ctx, a.ID)
		c.report = func() { m.core.HeartbeatResult(a.ID, err) }
	case scaler.RunReadyHook:
		c.report = func() { m.core.HookResult(a.ID, nil) }
	}
	w.checkProvider()
}

func (w *haWorld) observe(m *haMgr) {
	if m.core == nil {
		return
	}
	var listing []scaler.Listed
	if err := w.prov.Update(context.Background(), func(id string, st provider.State) {
		listing = append(listing, scaler.Listed{ID: id, State: st})
	}); err != nil {
		w.t.Fatal(err)
	}
	m.core.Advance(w.now)
	m.core.Observe(listing)
	w.flush(m)
	w.runCalls(m)
}

// takeJobs is the job loop: a job is taken from the shared queue only once
// its booking is saved (fleet.Reserve returns after the save).
func (w *haWorld) takeJobs(m *haMgr) {
	for len(w.queue) > 0 && m.core != nil && w.rng.IntN(4) != 0 {
		k := w.queue[0]
		if err := m.core.Reserve(k); err != nil {
			if !errors.Is(err, scaler.ErrNoCapacity) {
				w.errorf("Reserve(%s): %v", k, err)
			}
			return
		}
		j := &haJob{key: k, by: m, term: m.term, state: jobWaiting, since: w.now}
		w.jobs[k] = j // known before the flush: a Bound may come in it
		w.flush(m)
		if m.core == nil {
			// fleet.ErrStopped: the job stays queued for whoever leads.
			delete(w.jobs, k)
			return
		}
		// Taking the job is a write to the queue in the store, fenced
		// like a save: a manager cut off from it takes nothing and gives
		// the booking back (the job loop's Unreserve).
		if ok, fenced := w.fencedWrite(m); !ok {
			delete(w.jobs, k)
			if fenced {
				w.stop(m, "taking a job from the queue was refused by the fence")
				return
			}
			_ = m.core.Unreserve(k)
			w.flush(m)
			return
		}
		w.queue = w.queue[1:]
		w.jobsTaken++
		w.logf("%s takes %s", m.name, k)
		id, ok, err := m.core.Acquire(k)
		if err != nil {
			w.errorf("Acquire(%s) after Reserve: %v", k, err)
			return
		}
		if ok {
			j.state, j.inst, j.until = jobRunning, id, w.now.Add(time.Duration(5+w.rng.IntN(120))*time.Second)
		}
		w.flush(m)
		w.runCalls(m)
	}
}

// finishJobs ends m's running jobs whose time came, and gives up waits
// past the acquire timeout. A job that ran to its end has finished even
// when the release can no longer be saved.
func (w *haWorld) finishJobs(m *haMgr) {
	for _, j := range w.sortedJobs() {
		if m.core == nil {
			return
		}
		if j.ended != "" || j.by != m || j.term != m.term {
			continue
		}
		switch {
		case j.state == jobRunning && !w.now.Before(j.until):
			if err := m.core.Release(j.key); err != nil && !errors.Is(err, scaler.ErrUnknownKey) {
				w.errorf("Release(%s): %v", j.key, err)
			}
			w.end(j, "finished")
		case j.state == jobWaiting && w.now.Sub(j.since) > 15*time.Minute:
			_ = m.core.Release(j.key)
			w.end(j, "failed: no instance before the acquire timeout: "+m.core.Why(j.key))
		default:
			continue
		}
		w.flush(m)
		w.runCalls(m)
	}
}

func (w *haWorld) end(j *haJob, how string) {
	j.ended = how
	if how == "finished" {
		w.jobsFinished++
	} else {
		w.jobsFailed++
	}
	w.logf("%s %s", j.key, how)
}

func (w *haWorld) sortedJobs() []*haJob {
	keys := make([]string, 0, len(w.jobs))
	for k := range w.jobs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*haJob, len(keys))
	for i, k := range keys {
		out[i] = w.jobs[k]
	}
	return out
}

func (w *haWorld) checkProvider() {
	if live := len(w.prov.Instances()); live > w.cfg.MaxInstances {
		w.errorf("%d instances exist, max_instances is %d", live, w.cfg.MaxInstances)
	}
}

// check runs the invariants that hold after every step.
func (w *haWorld) check() {
	w.checkProvider()
	if m := w.store.leader; m != nil && m.core != nil {
		if err := m.core.CheckForTest(); err != nil {
			w.errorf("%s: %v", m.name, err)
		}
	}
	leading := 0
	for _, m := range w.mgrs {
		if m.core != nil && m.term == w.store.term {
			leading++
		}
	}
	if leading > 1 {
		w.errorf("%d managers hold the current term", leading)
	}
}

// drain stops faults and arrivals and lets every job end.
func (w *haWorld) drain() {
	w.noFail = true
	for _, m := range w.mgrs {
		m.pausedUntil, m.cutUntil = time.Time{}, time.Time{}
	}
	for i := 0; i < 2000 && !w.allEnded(); i++ {
		w.step(false)
		if w.t.Failed() {
			return
		}
	}
	if !w.allEnded() {
		var live []string
		for _, j := range w.sortedJobs() {
			if j.ended == "" {
				live = append(live, fmt.Sprintf("%s(by %s term %d, state %d)", j.key, j.by.name, j.term, j.state))
			}
		}
		w.errorf("jobs never ended: %v; %d still queued", live, len(w.queue))
	}
	for _, j := range w.jobs {
		if j.ended != "" && j.ended != "finished" && (!strings.HasPrefix(j.ended, "failed: ") || j.ended == "failed: ") {
			w.errorf("job %s ended without a reason: %q", j.key, j.ended)
		}
	}
}

func (w *haWorld) allEnded() bool {
	if len(w.queue) > 0 {
		return false
	}
	for _, j := range w.jobs {
		if j.ended == "" {
			return false
		}
	}
	return true
}
