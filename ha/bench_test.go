package ha

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

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

// Failover after the leader dies without a word (its client closed, as
// by kill -9: no resign, no revoke): the time until a standby leads. It
// is about the lease TTL plus etcd's expiry check. Run it with
// -benchtime=20x for the p50/max over 20 failovers.
func BenchmarkFailoverAfterLeaderDies(b *testing.B) {
	var took []time.Duration
	for range b.N {
		p := fmt.Sprintf("/failover-%d/", prefixes.Add(1))
		dead := benchClient(b)
		a := NewElector(dead, p, testTTL, "a", quiet())
		if _, err := a.Campaign(b.Context()); err != nil {
			b.Fatal(err)
		}
		standby := NewElector(benchClient(b), p, testTTL, "b", quiet())
		won := make(chan *Term, 1)
		go func() {
			term, err := standby.Campaign(b.Context())
			if err != nil {
				b.Error(err)
			}
			won <- term
		}()
		time.Sleep(100 * time.Millisecond) // b is waiting as a standby
		start := time.Now()
		dead.Close()
		term := <-won
		took = append(took, time.Since(start))
		if term != nil {
			term.Resign(b.Context())
		}
	}
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2].Seconds(), "p50_s")
	b.ReportMetric(took[len(took)-1].Seconds(), "max_s")
	b.ReportMetric(testTTL.Seconds(), "lease_ttl_s")
}

// BenchmarkConfirm is the price a manager pays under [ha] before each
// provider call and job start: one linearizable read of its election key
// from the shared three-member cluster.
func BenchmarkConfirm(b *testing.B) {
	cli := benchClient(b)
	p := fmt.Sprintf("/bench-%d/", prefixes.Add(1))
	el := NewElector(cli, p, 10*time.Second, "bench", quiet())
	term, err := el.Campaign(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	defer term.Resign(context.Background())
	b.ResetTimer()
	for range b.N {
		if err := term.Confirm(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
