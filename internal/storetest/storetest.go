// Package storetest is the contract every store.Store backend meets: the
// bbolt file and etcd run the same cases.
package storetest

import (
	"testing"
	"time"

	"github.com/berth-ci/berth/scaler"
	"github.com/berth-ci/berth/store"
)

// Backend opens stores for the contract.
type Backend struct {
	// Open returns a new, empty store, ready to Save.
	Open func(t *testing.T) store.Store
	// Reopen closes s and opens the same state again, ready to Save, as a
	// restarted (or newly elected) manager would.
	Reopen func(t *testing.T, s store.Store) store.Store
}

var now = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// full is a state with one of everything.
func full() scaler.State {
	return scaler.State{
		Instances: []scaler.InstanceRecord{
			{ID: "i1", Phase: "suspending", UseCount: 3, Created: now},
			{ID: "i2", Phase: "ready", Created: now.Add(time.Minute)},
		},
		Reservations: []scaler.ReservationRecord{{Key: "k1", InstanceID: "i2", Acquired: true}, {Key: "k2"}},
		Envs:         []scaler.EnvRecord{{Key: "e1", InstanceID: "i1", State: []byte("saved"), ParkedAt: now}},
		Pending:      []time.Time{now},
		Arrivals:     &scaler.ArrivalModel{DayRate: []float64{0.5}, DayBurst: []float64{40}, DaySeen: []int{3}},
		Learned: &scaler.Learned{At: now, Runs: []float64{0, 3.5}, RunsN: 4, Trust: 0.7, BootEstimate: time.Minute,
			Envelope: []scaler.EnvelopeMinute{{Minute: 29481960, Tier: 30, Hot: 2}}},
	}
}

// Run runs the contract against b.
func Run(t *testing.T, b Backend) {
	t.Run("new store has nothing saved", func(t *testing.T) {
		s := b.Open(t)
		defer s.Close()
		if s.ID() == "" {
			t.Fatal("empty state id")
		}
		if _, ok, err := s.Load(); err != nil || ok {
			t.Fatalf("load: ok=%v err=%v, want nothing saved", ok, err)
		}
	})
	t.Run("save then reopen keeps everything and the id", func(t *testing.T) {
		s := b.Open(t)
		if err := s.Save(full()); err != nil {
			t.Fatal(err)
		}
		id := s.ID()
		s = b.Reopen(t, s)
		defer s.Close()
		if s.ID() != id {
			t.Fatalf("id changed across reopen: %s → %s", id, s.ID())
		}
		mustLoad(t, s, full())
	})
	t.Run("a later save replaces, never merges", func(t *testing.T) {
		s := b.Open(t)
		defer s.Close()
		if err := s.Save(full()); err != nil {
			t.Fatal(err)
		}
		next := scaler.State{
			Instances:    []scaler.InstanceRecord{{ID: "i2", Phase: "deleting", Created: now, DeleteReason: "idle"}},
			Reservations: nil,
			Envs:         []scaler.EnvRecord{{Key: "e2", InstanceID: "i2", State: []byte("other"), ParkedAt: now}},
			Arrivals:     &scaler.ArrivalModel{DayRate: []float64{1}, DayBurst: []float64{2}, DaySeen: []int{4}},
			Learned:      &scaler.Learned{At: now.Add(time.Minute), RunsN: 5, Trust: 0.2},
		}
		if err := s.Save(next); err != nil {
			t.Fatal(err)
		}
		mustLoad(t, s, next)
		s = b.Reopen(t, s)
		defer s.Close()
		mustLoad(t, s, next)
		if err := s.Save(scaler.State{}); err != nil {
			t.Fatal(err)
		}
		// The arrival model and the learned state are kept when the core
		// has none to hand over.
		mustLoad(t, s, scaler.State{Arrivals: next.Arrivals, Learned: next.Learned})
	})
	t.Run("saving the same state twice changes nothing", func(t *testing.T) {
		s := b.Open(t)
		defer s.Close()
		for range 2 {
			if err := s.Save(full()); err != nil {
				t.Fatal(err)
			}
		}
		mustLoad(t, s, full())
	})
}

func mustLoad(t *testing.T, s store.Store, want scaler.State) {
	t.Helper()
	got, ok, err := s.Load()
	if err != nil || !ok {
		t.Fatalf("load: ok=%v err=%v", ok, err)
	}
	if d := Diff(got, want); d != "" {
		t.Fatalf("loaded state differs from the saved one: %s", d)
	}
}
