package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/scaler"
)

// BenchmarkFleetReserveAcquireRelease measures a full booking cycle through
// the daemon's own path (lock, core, flush, ConnectInfo) with 10,000 keys
// over 2,500 ready instances of 4 slots, from many goroutines.
func BenchmarkFleetReserveAcquireRelease(b *testing.B) {
	cfg := scaler.Config{CapacityPerInstance: 4, MaxInstances: 2500,
		Policies:      scaler.FixedPolicy(policy.Policy{IdleCount: 10000, IdleTime: time.Hour, Preemptive: true}),
		ThrottleLimit: 1e6, ThrottleBurst: 10000}
	group := sim.New(sim.Config{}, time.Now)
	f := New(scaler.New(cfg, time.Now()), Options{Provider: group, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		UpdateInterval: time.Hour, TickInterval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(ctx)
	for f.Counts().InstancesByPhase["ready"] < 2500 {
		f.Kick()
		time.Sleep(10 * time.Millisecond)
	}
	var next, done atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := fmt.Sprintf("k%d", next.Add(1)%10000)
			if err := f.Reserve(key); err != nil {
				continue // another goroutine holds this key right now
			}
			if _, err := f.Acquire(ctx, key); err != nil {
				b.Error(err)
				return
			}
			if err := f.Release(key); err != nil {
				b.Error(err)
				return
			}
			done.Add(1)
		}
	})
	b.ReportMetric(float64(done.Load())/b.Elapsed().Seconds(), "cycles/s")
}
