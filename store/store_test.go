package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/scaler"
)

func TestSaveLoadRoundTripKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.Load(); err != nil || ok {
		t.Fatalf("new store: ok=%v err=%v, want nothing saved", ok, err)
	}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	st := scaler.State{
		Instances:    []scaler.InstanceRecord{{ID: "i1", Phase: "suspending", UseCount: 3, Created: now}},
		Reservations: []scaler.ReservationRecord{{Key: "k1", InstanceID: "i2", Acquired: true}},
		Envs:         []scaler.EnvRecord{{Key: "e1", InstanceID: "i1", State: []byte("saved"), ParkedAt: now}},
		Pending:      []time.Time{now},
	}
	if err := b.Save(st); err != nil {
		t.Fatal(err)
	}
	id := b.ID()
	b.Close()

	b, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.ID() != id {
		t.Fatalf("id changed across reopen: %s → %s", id, b.ID())
	}
	got, ok, err := b.Load()
	if err != nil || !ok {
		t.Fatalf("load: ok=%v err=%v", ok, err)
	}
	if len(got.Instances) != 1 || got.Instances[0].Phase != "suspending" || got.Instances[0].UseCount != 3 {
		t.Errorf("instances = %+v", got.Instances)
	}
	if len(got.Envs) != 1 || string(got.Envs[0].State) != "saved" {
		t.Errorf("environments = %+v", got.Envs)
	}
	if len(got.Reservations) != 1 || !got.Reservations[0].Acquired {
		t.Errorf("reservations = %+v", got.Reservations)
	}
	if len(got.Pending) != 1 || !got.Pending[0].Equal(now) {
		t.Errorf("pending = %v", got.Pending)
	}

	// A later save replaces, never merges.
	if err := b.Save(scaler.State{}); err != nil {
		t.Fatal(err)
	}
	got, _, _ = b.Load()
	if len(got.Instances)+len(got.Envs)+len(got.Reservations)+len(got.Pending) != 0 {
		t.Errorf("after saving an empty state: %+v", got)
	}
}

func TestCorruptFileIsRefusedWithItsName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a bbolt file ", 512)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path)
	if err == nil {
		t.Fatal("opened a corrupt file")
	}
	for _, want := range []string{path, "damaged", "has not written to it", "move state.db aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), "not a bbolt file") {
		t.Error("the corrupt file was modified")
	}
}

func TestSecondOpenIsLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = Open(path)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
}

// The learned arrival pattern survives a reopen, so a restart does not
// forget the week berth has seen.
func TestArrivalModelRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m := &scaler.ArrivalModel{DayRate: []float64{0.5}, DayBurst: []float64{40}, DaySeen: []int{3}}
	if err := b.Save(scaler.State{Arrivals: m}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, _, err := b.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got.Arrivals == nil || got.Arrivals.DayBurst[0] != 40 || got.Arrivals.DaySeen[0] != 3 {
		t.Fatalf("arrival model after reopen = %+v", got.Arrivals)
	}
}

// Saves write only what changed; the saved state must still be exactly the
// last one: changed entries updated, gone ones deleted, new ones added.
func TestSaveKeepsExactlyTheLastStateWhenPartlyChanged(t *testing.T) {
	b, err := Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	first := scaler.State{
		Instances:    []scaler.InstanceRecord{{ID: "i1", Phase: "running"}, {ID: "i2", Phase: "running"}},
		Reservations: []scaler.ReservationRecord{{Key: "k1", InstanceID: "i1"}, {Key: "k2", InstanceID: "i2"}},
	}
	if err := b.Save(first); err != nil {
		t.Fatal(err)
	}
	second := scaler.State{
		Instances:    []scaler.InstanceRecord{{ID: "i1", Phase: "suspending", UseCount: 1}, {ID: "i3", Phase: "creating"}},
		Reservations: []scaler.ReservationRecord{{Key: "k1", InstanceID: "i1", Acquired: true}},
	}
	if err := b.Save(second); err != nil {
		t.Fatal(err)
	}
	got, _, err := b.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Instances) != 2 || got.Instances[0].ID != "i1" || got.Instances[0].Phase != "suspending" ||
		got.Instances[0].UseCount != 1 || got.Instances[1].ID != "i3" {
		t.Errorf("instances = %+v, want i1 suspending (use 1) and i3", got.Instances)
	}
	if len(got.Reservations) != 1 || got.Reservations[0].Key != "k1" || !got.Reservations[0].Acquired {
		t.Errorf("reservations = %+v, want k1 acquired only", got.Reservations)
	}
}
