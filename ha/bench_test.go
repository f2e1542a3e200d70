package ha

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/berth-ci/berth/scaler"
	"github.com/berth-ci/berth/store"
)

// fleetState is a busy fleet: 50 instances, 40 bookings.
func fleetState() scaler.State {
	st := instances()
	for i := range 50 {
		st.Instances = append(st.Instances, instances(fmt.Sprintf("i-%03d", i)).Instances...)
	}
	for i := range 40 {
		st.Reservations = append(st.Reservations, scaler.ReservationRecord{Key: fmt.Sprintf("k-%03d", i), InstanceID: fmt.Sprintf("i-%03d", i)})
	}
	return st
}

// benchBooking saves the state once per booking change, as the fleet does
// when a job acquires its slot: one record differs from the last save.
func benchBooking(b *testing.B, s store.Store) {
	st := fleetState()
	if err := s.Save(st); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		r := &st.Reservations[i%len(st.Reservations)]
		r.Acquired = !r.Acquired
		if err := s.Save(st); err != nil {
			b.Fatal(err)
		}
	}
}

// The bbolt file (fsync on every commit) for comparison.
func BenchmarkSaveBookingBolt(b *testing.B) {
	s, err := store.Open(filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	benchBooking(b, s)
}

// The shared three-member embedded cluster: every Save is a fenced
// transaction replicated to a quorum (over loopback; the members do not
// fsync, so a real cluster adds its disk's fsync latency).
func BenchmarkSaveBookingEtcd(b *testing.B) {
	cli := benchClient(b)
	p := fmt.Sprintf("/bench-%d/", prefixes.Add(1))
	s, err := OpenStore(b.Context(), cli, p)
	if err != nil {
		b.Fatal(err)
	}
	el := NewElector(cli, p, testTTL, "bench", quiet())
	term, err := el.Campaign(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	defer term.Resign(b.Context())
	s.SetFence(term.Fence())
	benchBooking(b, s)
	b.StopTimer()
	st := s.Stats()
	b.ReportMetric(float64(st.Puts+st.Deletes)/float64(st.Txns), "keys/txn")
}
