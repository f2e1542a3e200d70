package bench

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
)

// fleetCore returns a core with n ready instances of capacity slots each,
// preemptive, that never scales in during a benchmark.
func fleetCore(tb testing.TB, n, capacity int) (*scaler.Scaler, time.Time) {
	tb.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := scaler.New(scaler.Config{
		CapacityPerInstance: capacity,
		MaxInstances:        n,
		Policies:            scaler.FixedPolicy(policy.Policy{IdleTime: 24 * time.Hour, Preemptive: true}),
	}, now)
	listing := make([]scaler.Listed, n)
	for i := range listing {
		listing[i] = scaler.Listed{ID: fmt.Sprintf("i-%05d", i), State: provider.StateRunning}
	}
	// Instances the core did not ask for and that already run are adopted
	// idle and ready, which builds the fleet in one step.
	s.Observe(listing)
	s.Ready()
	for i := range n * capacity {
		if err := s.Reserve(fmt.Sprint("probe-", i)); err != nil {
			tb.Fatalf("fleet of %d×%d has no slot %d: %v", n, capacity, i, err)
		}
	}
	for i := range n * capacity {
		if err := s.Unreserve(fmt.Sprint("probe-", i)); err != nil {
			tb.Fatal(err)
		}
	}
	s.Ready()
	return s, now
}

// BenchmarkReserveAcquireRelease is the booking hot path under contention:
// 10,000 keys over 2,500 ready instances of 4 slots (preemptive), cycled
// by many goroutines. The core is not safe for concurrent use, so one mutex
// owns it, as in the daemon; each call takes the lock on its own, so the
// goroutines interleave between the three steps of a cycle.
func BenchmarkReserveAcquireRelease(b *testing.B) {
	const keys, instances, capacity = 10000, 2500, 4
	s, _ := fleetCore(b, instances, capacity)
	var mu sync.Mutex
	const parallelism = 8
	workers := parallelism * runtime.GOMAXPROCS(0)
	perWorker := keys / workers
	names := make([][]string, workers)
	for w := range names {
		names[w] = make([]string, perWorker)
		for k := range names[w] {
			names[w][k] = fmt.Sprintf("job-%d-%d", w, k)
		}
	}
	var nextWorker atomic.Int64
	var failures atomic.Int64
	b.SetParallelism(parallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		mine := names[int(nextWorker.Add(1)-1)%workers]
		k := 0
		for pb.Next() {
			key := mine[k]
			k++
			if k == len(mine) {
				k = 0
			}
			mu.Lock()
			err := s.Reserve(key)
			mu.Unlock()
			if err != nil {
				if !errors.Is(err, scaler.ErrNoCapacity) {
					b.Error(err)
					return
				}
				failures.Add(1)
				continue
			}
			mu.Lock()
			_, ok, err := s.Acquire(key)
			mu.Unlock()
			if err != nil || !ok {
				b.Errorf("acquire %s: ok=%v err=%v", key, ok, err)
				return
			}
			mu.Lock()
			err = s.Release(key)
			if s.HasReady() {
				s.Ready()
			}
			mu.Unlock()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cycles/s")
	if f := failures.Load(); f > 0 {
		b.Fatalf("%d reservations refused with 10,000 free slots", f)
	}
}

// BenchmarkScaleDecision is one Tick — scale-in candidates, timeouts and
// the scaling decision — over 2,500 ready instances, half of them busy.
func BenchmarkScaleDecision(b *testing.B) {
	const instances = 2500
	s, now := fleetCore(b, instances, 1)
	for i := range instances / 2 {
		key := fmt.Sprint("busy-", i)
		if err := s.Reserve(key); err != nil {
			b.Fatal(err)
		}
		if _, ok, err := s.Acquire(key); err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
	s.Ready()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		now = now.Add(time.Second)
		s.Advance(now)
		s.Tick()
		s.Ready()
	}
}

// BenchmarkObserve is one provider listing of 2,500 running instances fed
// to the core, which the daemon does every poll interval.
func BenchmarkObserve(b *testing.B) {
	const instances = 2500
	s, now := fleetCore(b, instances, 1)
	listing := make([]scaler.Listed, instances)
	for i := range listing {
		listing[i] = scaler.Listed{ID: fmt.Sprintf("i-%05d", i), State: provider.StateRunning}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		now = now.Add(time.Second)
		s.Advance(now)
		s.Observe(listing)
		s.Ready()
	}
}

// BenchmarkReplayTravisWeek replays the whole Travis week through berth at
// max 300 (`berth bench --trace ... --idle-count 5 --max-instances 300`);
// run it with -cpuprofile to see where a replay spends its time.
func BenchmarkReplayTravisWeek(b *testing.B) {
	jobs := fullTrace(b, travisTrace)
	cfg := cfgFor(PolicyBerth, 300, 5)
	for b.Loop() {
		if _, err := Run(jobs, jobs[0].Arrival, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplayGoogleSlice replays the in-repo four hours of Google's
// trace through berth below the limit, so a clone can profile a replay
// without the full traces.
func BenchmarkReplayGoogleSlice(b *testing.B) {
	w := googleWorkload(b)
	cfg := cfgFor(PolicyBerth, w.roomy, 5)
	for b.Loop() {
		if _, err := Run(w.jobs, w.start, cfg); err != nil {
			b.Fatal(err)
		}
	}
}
