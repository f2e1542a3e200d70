package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/scaler"
	"github.com/berth-ci/berth/store"
)

// fencedStore saves until it is fenced, as ha.Store does once another
// manager took over: from then on every save is refused with an error
// matching store.ErrFenced. It also answers Leading like ha.Store.
type fencedStore struct {
	mu     sync.Mutex
	saves  int
	fenced bool
	// leading is what Leading answers while saves still commit.
	leading error
	// onFence runs at the first refused save.
	onFence func()
}

var errTakenOver = fmt.Errorf("save berth state: %w", store.ErrFenced)

func (s *fencedStore) Save(scaler.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fenced {
		if s.onFence != nil {
			s.onFence()
			s.onFence = nil
		}
		return errTakenOver
	}
	s.saves++
	return nil
}

func (s *fencedStore) Leading() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fenced {
		return errTakenOver
	}
	return s.leading
}

// fence makes every later save refused; onFence runs at the first.
func (s *fencedStore) fence(onFence func()) {
	s.mu.Lock()
	s.fenced, s.onFence = true, onFence
	s.mu.Unlock()
}

// callLog wraps a provider and records every call that changes the fleet
// (Increase, Decrease, Suspend, Resume, Heartbeat); a gate can hold Decrease.
type callLog struct {
	*sim.Group
	mu    sync.Mutex
	calls []string
	// gate, when set, holds each Decrease until it is closed; entered is
	// signalled when one is held.
	gate    chan struct{}
	entered chan struct{}
}

func (p *callLog) record(call string) {
	p.mu.Lock()
	p.calls = append(p.calls, call)
	p.mu.Unlock()
}

// made returns the calls so far.
func (p *callLog) made() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

func (p *callLog) Increase(ctx context.Context, n int) (int, error) {
	p.record(fmt.Sprintf("increase %d", n))
	return p.Group.Increase(ctx, n)
}

func (p *callLog) Decrease(ctx context.Context, ids []string) ([]string, error) {
	p.record(fmt.Sprintf("decrease %v", ids))
	if p.gate != nil {
		p.entered <- struct{}{}
		<-p.gate
	}
	return p.Group.Decrease(ctx, ids)
}

func (p *callLog) Suspend(ctx context.Context, ids []string) ([]string, error) {
	p.record(fmt.Sprintf("suspend %v", ids))
	return p.Group.Suspend(ctx, ids)
}

func (p *callLog) Resume(ctx context.Context, ids []string) ([]string, error) {
	p.record(fmt.Sprintf("resume %v", ids))
	return p.Group.Resume(ctx, ids)
}

func (p *callLog) Heartbeat(ctx context.Context, id string) error {
	p.record("heartbeat " + id)
	return p.Group.Heartbeat(ctx, id)
}

var _ provider.Suspender = (*callLog)(nil)

// fencingFleet is a fleet on a callLog provider whose Run's result is kept.
type fencingFleet struct {
	*Fleet
	prov    *callLog
	runDone chan struct{}
	runErr  error
}

func newFencingFleet(t *testing.T, st Store, prov *callLog) *fencingFleet {
	t.Helper()
	return newFencingFleetWith(t, scaler.Config{MaxInstances: 3, CapacityPerInstance: 1, CanSuspend: true,
		Policies: scaler.FixedPolicy(policy.Policy{IdleCount: 0, IdleTime: time.Minute})}, st, prov)
}

func newFencingFleetWith(t *testing.T, cfg scaler.Config, st Store, prov *callLog) *fencingFleet {
	t.Helper()
	f := &fencingFleet{Fleet: New(scaler.New(cfg, time.Now()), Options{
		Provider: prov, Store: st, UpdateInterval: 20 * time.Millisecond, TickInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}), prov: prov, runDone: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { f.runErr = f.Run(ctx); close(f.runDone) }()
	t.Cleanup(func() { cancel(); <-f.runDone })
	return f
}

func newCallLog() *callLog {
	return &callLog{Group: sim.New(sim.Config{SupportsSuspend: true}, time.Now)}
}

// start books and acquires key, and waits until no provider call is in flight.
func (f *fencingFleet) start(t *testing.T, key string) Acquisition {
	t.Helper()
	if err := f.Reserve(key); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	acq, err := f.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	f.waitCalls(ctx)
	return acq
}

// stopped checks that the fleet stopped for being fenced: Fenced is
// closed, Run returned the reason, and every call says so.
func (f *fencingFleet) stopped(t *testing.T) {
	t.Helper()
	select {
	case <-f.Fenced():
	case <-time.After(10 * time.Second):
		t.Fatal("Fenced was not closed after a fenced save")
	}
	select {
	case <-f.runDone:
	case <-time.After(10 * time.Second):
		t.Fatal("Run goes on after the fleet was fenced")
	}
	if !errors.Is(f.runErr, ErrStopped) || !errors.Is(f.runErr, store.ErrFenced) {
		t.Errorf("Run returned %v; want ErrStopped wrapping store.ErrFenced", f.runErr)
	}
	if err := f.Reserve("after"); !errors.Is(err, ErrStopped) || !errors.Is(err, store.ErrFenced) {
		t.Errorf("Reserve after the fence: %v; want ErrStopped wrapping store.ErrFenced", err)
	}
	if _, err := f.Acquire(context.Background(), "after"); !errors.Is(err, ErrStopped) {
		t.Errorf("Acquire after the fence: %v; want ErrStopped", err)
	}
	if err := f.Release("job-1"); !errors.Is(err, ErrStopped) {
		t.Errorf("Release after the fence: %v; want ErrStopped", err)
	}
}

// A delete and a suspend the core wants in one flush whose save is
// refused by the fence: neither is carried out, the fleet stops for good,
// and no provider call follows, ever.
func TestFencedSaveStopsEveryProviderCall(t *testing.T) {
	st := &fencedStore{}
	f := newFencingFleet(t, st, newCallLog())
	one := f.start(t, "job-1")
	two := f.start(t, "job-2")

	var before []string
	st.fence(func() { before = f.prov.made() })
	err := f.do(func(c *scaler.Scaler) {
		if err := c.Discard("job-1", "the job broke its instance"); err != nil {
			t.Error(err)
		}
		if err := c.Suspend("job-2", "env-2", []byte("saved")); err != nil {
			t.Error(err)
		}
	})
	if !errors.Is(err, ErrStopped) || !errors.Is(err, store.ErrFenced) {
		t.Fatalf("a flush whose save was fenced returned %v; want ErrStopped wrapping store.ErrFenced", err)
	}
	f.stopped(t)
	if after := f.prov.made(); len(after) != len(before) {
		t.Fatalf("provider calls after the fenced save: %v (before it: %v); want none", after[len(before):], before)
	}
	for _, in := range f.prov.Instances() {
		if (in.ID == one.Instance || in.ID == two.Instance) && in.State != provider.StateRunning {
			t.Errorf("instance %s is %s after a fenced save; want running, untouched", in.ID, in.State)
		}
	}
}

// A Decrease is in the provider when another save is fenced: it finishes,
// its result is dropped, and nothing is called after it; Run waits for it.
func TestCallInFlightFinishesWithoutANewCall(t *testing.T) {
	st := &fencedStore{}
	prov := newCallLog()
	f := newFencingFleet(t, st, prov)
	f.start(t, "job-1")
	prov.gate, prov.entered = make(chan struct{}), make(chan struct{}, 1)
	var once sync.Once
	open := func() { once.Do(func() { close(prov.gate) }) }
	t.Cleanup(open) // runs before the fleet's cleanup, which waits for the call
	if err := f.Discard("job-1", "the job broke its instance"); err != nil {
		t.Fatal(err)
	}
	<-prov.entered // the delete is in the provider

	st.fence(nil)
	if err := f.Reserve("job-2"); !errors.Is(err, ErrStopped) {
		t.Fatalf("Reserve whose save was fenced: %v; want ErrStopped", err)
	}
	select {
	case <-f.runDone:
		t.Fatal("Run returned while a provider call was in flight")
	default:
	}
	inFlight := prov.made()
	open()
	f.stopped(t)
	if after := prov.made(); len(after) != len(inFlight) {
		t.Fatalf("provider calls after the call in flight: %v; want none", after[len(inFlight):])
	}
}

// A save that committed is no licence for a call made later: right before
// each provider call the fleet asks the store whether this manager still
// leads (a pause between the save and the call). Refused, it makes no call
// and stops.
func TestNoProviderCallOnceTheStoreSaysAnotherManagerLeads(t *testing.T) {
	st := &fencedStore{}
	prov := newCallLog()
	f := newFencingFleet(t, st, prov)
	f.start(t, "job-1")
	before := prov.made()
	st.mu.Lock()
	st.leading = errTakenOver // saves still commit: the proof is lost after them
	st.mu.Unlock()
	if err := f.Discard("job-1", "the job broke its instance"); err != nil {
		t.Fatalf("Discard whose save committed: %v", err)
	}
	f.stopped(t)
	if after := prov.made(); len(after) != len(before) {
		t.Fatalf("provider calls after leadership was lost: %v; want none", after[len(before):])
	}
}

// When the store cannot tell whether this manager leads (etcd
// unreachable), the call waits; it is made once the store answers yes.
func TestProviderCallWaitsUntilLeadershipIsConfirmed(t *testing.T) {
	st := &fencedStore{leading: errors.New("etcd: context deadline exceeded")}
	prov := newCallLog()
	f := newFencingFleet(t, st, prov)
	if err := f.Reserve("job-1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * confirmRetry) // several refused confirmations
	if made := prov.made(); len(made) != 0 {
		t.Fatalf("provider calls while leadership could not be confirmed: %v", made)
	}
	st.mu.Lock()
	st.leading = nil
	st.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.Acquire(ctx, "job-1"); err != nil {
		t.Fatalf("Acquire once leadership was confirmed: %v", err)
	}
	if f.Err() != nil {
		t.Fatalf("the fleet stopped although it never lost leadership: %v", f.Err())
	}
}

// A job waiting for an instance learns at once that the fleet stopped.
func TestWaitingAcquireFailsWhenFenced(t *testing.T) {
	st := &fencedStore{}
	prov := &callLog{Group: sim.New(sim.Config{NeverReadyRate: 1}, time.Now)}
	f := newFencingFleet(t, st, prov)
	if err := f.Reserve("job-1"); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := f.Acquire(context.Background(), "job-1")
		got <- err
	}()
	waitUntil(t, "the acquire to wait", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.waiters["job-1"] != nil
	})
	st.fence(nil)
	if err := f.Reserve("job-2"); !errors.Is(err, ErrStopped) {
		t.Fatalf("Reserve whose save was fenced: %v; want ErrStopped", err)
	}
	select {
	case err := <-got:
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("waiting Acquire returned %v; want ErrStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting Acquire did not return after the fence")
	}
	f.stopped(t)
}

// A full disk is not a lost leadership: the fleet goes on, only Increases
// wait for a save that works (docs/semantics.md).
func TestFullDiskDoesNotStopTheFleet(t *testing.T) {
	st := &failingStore{}
	prov := newCallLog()
	f := newFencingFleet(t, st, prov)
	f.start(t, "job-1")
	st.set(true)
	if err := f.Discard("job-1", "the job broke its instance"); err != nil {
		t.Fatalf("Discard with a full disk: %v", err)
	}
	waitUntil(t, "the delete to be made", func() bool {
		for _, c := range prov.made() {
			if len(c) > 8 && c[:8] == "decrease" {
				return true
			}
		}
		return false
	})
	if f.Err() != nil {
		t.Fatalf("a full disk stopped the fleet: %v", f.Err())
	}
}

// The manager learns first that its term ended (the lease is gone) and
// stops the fleet itself: nothing is called after Stop, even for a delete
// the core wants right then.
func TestStopEndsEveryProviderCall(t *testing.T) {
	prov := newCallLog()
	f := newFencingFleet(t, &fencedStore{}, prov)
	f.start(t, "job-1")
	before := prov.made()
	leaseLost := errors.New("the etcd lease of this manager ended")
	f.Stop(leaseLost)
	if err := f.Discard("job-1", "the job broke its instance"); !errors.Is(err, ErrStopped) || !errors.Is(err, leaseLost) {
		t.Fatalf("Discard after Stop: %v; want ErrStopped wrapping the cause", err)
	}
	f.stopped(t)
	if after := prov.made(); len(after) != len(before) {
		t.Fatalf("provider calls after Stop: %v; want none", after[len(before):])
	}
}
