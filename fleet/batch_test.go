package fleet

import (
	"errors"
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
