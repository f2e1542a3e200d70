package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/berth-ci/berth/ha"
	"github.com/berth-ci/berth/internal/etcdtest"
	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/scaler"
	"github.com/berth-ci/berth/store"
)

// benchFleet is a fleet of 50 ready instances of 4 slots on st, at
// max_instances, so that a booking changes one record and starts no
// provider call: what is measured is the booking and its save.
func benchFleet(b *testing.B, st Store) *Fleet {
	b.Helper()
	cfg := scaler.Config{CapacityPerInstance: 4, MaxInstances: 50,
		Policies: scaler.FixedPolicy(policy.Policy{IdleCount: 200, IdleTime: time.Hour, Preemptive: true})}
	f := New(scaler.New(cfg, time.Now()), Options{Provider: sim.New(sim.Config{}, time.Now), Store: st,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), UpdateInterval: time.Hour, TickInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	for f.Counts().InstancesByPhase["ready"] < 50 {
		f.Kick()
		time.Sleep(10 * time.Millisecond)
	}
	return f
}

// etcdStore is ha.Store on a new embedded cluster of n members, fenced by
// a won term.
func etcdStore(b *testing.B, n int) *ha.Store {
	b.Helper()
	c := etcdtest.Start(b, n)
	cli := c.Client(b)
	s, err := ha.OpenStore(b.Context(), cli, "/berth/")
	if err != nil {
		b.Fatal(err)
	}
	el := ha.NewElector(cli, "/berth/", 10*time.Second, "bench", slog.New(slog.NewTextHandler(io.Discard, nil)))
	term, err := el.Campaign(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { term.Resign(context.Background()) })
	s.SetFence(term.Fence())
	return s
}

func boltStore(b *testing.B) *store.Bolt {
	b.Helper()
	s, err := store.Open(filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkReserve measures fleet.Reserve, one booking and its save, on
// each store, one caller at a time (no group commit): p50 and p99 of the
// calls, and the writes to etcd per booking. The booking is given back
// (Unreserve, also saved) outside the measured call.
func BenchmarkReserve(b *testing.B) {
	for _, tc := range []struct {
		name string
		open func(b *testing.B) Store
	}{
		{"memory", func(*testing.B) Store { return nil }},
		{"bolt", func(b *testing.B) Store { return boltStore(b) }},
		{"etcd1", func(b *testing.B) Store { return etcdStore(b, 1) }},
		{"etcd3", func(b *testing.B) Store { return etcdStore(b, 3) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			st := tc.open(b)
			f := benchFleet(b, st)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				key := fmt.Sprintf("job-%d", i)
				start := time.Now()
				if err := f.Reserve(key); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				if err := f.Unreserve(key); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e6, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e6, "p99-ms")
		})
	}
}

// BenchmarkJobWritesEtcd drives whole jobs through the fleet on ha.Store
// (one member): reserve, acquire (bound at once to an idle slot), release;
// it reports etcd transactions, keys and bytes written per job.
func BenchmarkJobWritesEtcd(b *testing.B) {
	st := etcdStore(b, 1)
	f := benchFleet(b, st)
	ctx := context.Background()
	before := st.Stats()
	b.ResetTimer()
	for i := range b.N {
		key := fmt.Sprintf("job-%d", i)
		if err := f.Reserve(key); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Acquire(ctx, key); err != nil {
			b.Fatal(err)
		}
		if err := f.Release(key); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	after := st.Stats()
	n := float64(b.N)
	b.ReportMetric(float64(after.Txns-before.Txns)/n, "txns/job")
	b.ReportMetric(float64(after.Puts-before.Puts)/n, "puts/job")
	b.ReportMetric(float64(after.Deletes-before.Deletes)/n, "deletes/job")
	b.ReportMetric(float64(after.Bytes-before.Bytes)/n, "bytes/job")
}
