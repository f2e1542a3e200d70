package fleet

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/scaler"
)

// ReserveBatch books keys in order until the core refuses one, and says how
// many it booked; UnreserveBatch gives them all back.
func TestReserveBatchBooksUntilRefusedAndGivesBack(t *testing.T) {
	st := &failingStore{}
	f, _ := newFleet(t, onDemand(0), sim.Config{BootTime: time.Hour}, st)
	keys := []string{"job-1", "job-2", "job-3", "job-4", "job-5"}
	n, err := f.ReserveBatch(keys)
	if n != 3 || !errors.Is(err, scaler.ErrNoCapacity) {
		t.Fatalf("ReserveBatch of 5 keys with max_instances 3 = %d, %v; want 3 booked and no capacity", n, err)
	}
	if got := f.Counts().Unbound; got != 3 {
		t.Fatalf("%d bookings after ReserveBatch; want 3", got)
	}
	st.mu.Lock()
	booked := len(st.last.Reservations)
	st.mu.Unlock()
	if booked != 3 {
		t.Fatalf("the saved state holds %d bookings; want the 3 booked (saved before ReserveBatch returns)", booked)
	}
	if err := f.UnreserveBatch(keys[:n]); err != nil {
		t.Fatal(err)
	}
	if got := f.Counts().Unbound; got != 0 {
		t.Fatalf("%d bookings after UnreserveBatch; want 0", got)
	}
	if err := f.UnreserveBatch(keys[:1]); !errors.Is(err, scaler.ErrUnknownKey) {
		t.Fatalf("UnreserveBatch of a key given back already = %v; want unknown key", err)
	}
}

// gateStore holds the first Save until released and records the saves.
type gateStore struct {
	mu      sync.Mutex
	saves   int
	booked  []int // bookings in each saved state
	entered chan struct{}
	release chan struct{}
}

func (s *gateStore) Save(st scaler.State) error {
	s.mu.Lock()
	s.saves++
	s.booked = append(s.booked, len(st.Reservations))
	first := s.saves == 1
	s.mu.Unlock()
	if first {
		close(s.entered)
		<-s.release
	}
	return nil
}

// Calls that wait for the fleet's lock while a save is in progress are run
// together by the next holder with one save for all of them (group
// commit), and each returns its own result only after that save.
func TestCallsWaitingForTheLockShareOneSave(t *testing.T) {
	st := &gateStore{entered: make(chan struct{}), release: make(chan struct{})}
	f := New(scaler.New(scaler.Config{MaxInstances: 100, CapacityPerInstance: 1,
		Policies: onDemand(0).Policies}, time.Now()), Options{Provider: sim.New(sim.Config{BootTime: time.Hour}, time.Now), Store: st,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	first := make(chan error, 1)
	go func() { first <- f.Reserve("job-0") }()
	<-st.entered // job-0's save holds the lock

	const n = 10
	errs := make(chan error, n)
	for i := 1; i <= n; i++ {
		go func() { errs <- f.Reserve(fmt.Sprintf("job-%d", i)) }()
	}
	for waiting := 0; waiting < n; {
		time.Sleep(time.Millisecond)
		f.pendMu.Lock()
		waiting = len(f.pending)
		f.pendMu.Unlock()
	}
	close(st.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// The second save holds all of them (later saves are the instances
	// the bookings asked for).
	st.mu.Lock()
	booked := append([]int(nil), st.booked...)
	st.mu.Unlock()
	if len(booked) < 2 || booked[0] != 1 || booked[1] != n+1 {
		t.Fatalf("bookings in each save: %v; want 1, then all %d in the second", booked, n+1)
	}
	if got := f.Counts().Unbound; got != n+1 {
		t.Fatalf("%d bookings; want %d", got, n+1)
	}
}
