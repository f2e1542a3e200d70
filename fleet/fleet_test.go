package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/scaler"
)

// failingStore stands in for a full disk until healed.
type failingStore struct {
	mu     sync.Mutex
	broken bool
	saves  int
	last   scaler.State
}

func (s *failingStore) Save(st scaler.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return errors.New("write state.db: no space left on device")
	}
	s.saves++
	s.last = st
	return nil
}

func (s *failingStore) set(broken bool) {
	s.mu.Lock()
	s.broken = broken
	s.mu.Unlock()
}

func newFleet(t *testing.T, cfg scaler.Config, simCfg sim.Config, st Store) (*Fleet, *sim.Group) {
	t.Helper()
	group := sim.New(simCfg, time.Now)
	f := New(scaler.New(cfg, time.Now()), Options{
		Provider: group, Store: st, UpdateInterval: 20 * time.Millisecond, TickInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return f, group
}

func onDemand(idle int) scaler.Config {
	return scaler.Config{MaxInstances: 3, Policies: scaler.FixedPolicy(policy.Policy{IdleCount: idle, IdleTime: time.Minute})}
}

func TestAcquireWaitsForTheInstanceBootingForIt(t *testing.T) {
	f, group := newFleet(t, onDemand(0), sim.Config{BootTime: 100 * time.Millisecond, ListingLag: 50 * time.Millisecond}, nil)
	if err := f.Reserve("job-1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	acq, err := f.Acquire(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if acq.Instance == "" || acq.Connect.ID != acq.Instance {
		t.Fatalf("acquisition %+v lacks its instance or connection details", acq)
	}
	if got := group.Stats().Created; got != 1 {
		t.Errorf("%d instances created for one booking, want 1", got)
	}
	if err := f.Release("job-1"); err != nil {
		t.Fatal(err)
	}
}

func TestAcquireTimeoutSaysWhyAndGivesTheBookingBack(t *testing.T) {
	// A cloud whose instances never become ready.
	f, _ := newFleet(t, onDemand(0), sim.Config{NeverReadyRate: 1}, nil)
	if err := f.Reserve("job-1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := f.Acquire(ctx, "job-1")
	if err == nil || !strings.Contains(err.Error(), "job-1") || !strings.Contains(err.Error(), "acquire timeout") {
		t.Fatalf("acquire error %v: want one naming the booking and the timeout", err)
	}
	if f.Counts().Unbound != 0 {
		t.Error("the booking was not given back after the timeout")
	}
}

func TestNoInstanceIsCreatedWhileStateCannotBeSaved(t *testing.T) {
	st := &failingStore{broken: true}
	f, group := newFleet(t, onDemand(1), sim.Config{}, st)
	time.Sleep(200 * time.Millisecond) // several ticks that want an idle instance
	if n := group.Stats().Requested; n != 0 {
		t.Fatalf("%d instances requested while the intent could not be recorded", n)
	}
	st.set(false)
	deadline := time.Now().Add(10 * time.Second)
	for group.Stats().Created == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no instance created after the store recovered")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if f.Counts().Pending+len(f.Instances()) == 0 {
		t.Error("the fleet does not account for the instance it created")
	}
}

// A running job is watched through AfterLost (no goroutine per job): the
// function runs once the instance under it is lost, with the reason set.
func TestAfterLostRunsWhenTheInstanceUnderAJobIsLost(t *testing.T) {
	f, group := newFleet(t, onDemand(0), sim.Config{}, nil)
	if err := f.Reserve("job-1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	acq, err := f.Acquire(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	lost := make(chan string, 1)
	acq.AfterLost(func() { lost <- acq.LostReason() })
	stop := acq.AfterLost(func() { t.Error("a stopped AfterLost function ran") })
	if !stop() {
		t.Error("stopping an AfterLost function before the loss reported false")
	}
	if err := group.Kill(acq.Instance); err != nil {
		t.Fatal(err)
	}
	select {
	case reason := <-lost:
		if reason == "" {
			t.Error("AfterLost ran before LostReason was set")
		}
	case <-ctx.Done():
		t.Fatal("the AfterLost function never ran after the instance was killed")
	}
	if (Acquisition{}).AfterLost(func() {})() {
		t.Error("stop on an acquisition without an instance reported true")
	}
}

// A job's arrival in its source reaches the core for its booking, and an
// arrival for a key with no booking says so rather than vanishing.
func TestArrivedAtNeedsTheBooking(t *testing.T) {
	f, _ := newFleet(t, onDemand(0), sim.Config{BootTime: 10 * time.Millisecond}, nil)
	if err := f.ArrivedAt("job-1", time.Now().Add(-time.Minute)); !errors.Is(err, scaler.ErrUnknownKey) {
		t.Errorf("arrival without a booking: %v, want ErrUnknownKey", err)
	}
	if err := f.Reserve("job-1"); err != nil {
		t.Fatal(err)
	}
	if err := f.ArrivedAt("job-1", time.Now().Add(-time.Minute)); err != nil {
		t.Errorf("arrival of a booked job: %v", err)
	}
}
