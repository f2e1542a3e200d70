package plugin

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-ci/berth/fleet"
	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/scaler"
)

// benchGroup returns the simulated cloud built in ("builtin") or served by
// the berth-provider-sim plugin binary ("plugin"), initialised.
func benchGroup(b *testing.B, name string) provider.InstanceGroup {
	if name == "builtin" {
		return sim.New(sim.Config{}, time.Now)
	}
	plug := New(Options{Name: "sim", Path: simPlugin, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		PassMissingHostKeys: true}) // sim instances have no SSH server to learn a key from
	if _, err := plug.Init(context.Background(), provider.Settings{StateDir: b.TempDir()}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { plug.Shutdown(context.Background()) })
	return plug
}

// BenchmarkReserveAcquireRelease measures a full booking cycle through the
// daemon's own path (lock, core, flush, ConnectInfo), as fleet's
// BenchmarkFleetReserveAcquireRelease does, with the provider built in and
// behind the plugin protocol: 10,000 keys over 2,500 ready instances of 4
// slots, from many goroutines.
func BenchmarkReserveAcquireRelease(b *testing.B) {
	for _, name := range []string{"builtin", "plugin"} {
		b.Run(name, func(b *testing.B) {
			group := benchGroup(b, name)
			cfg := scaler.Config{CapacityPerInstance: 4, MaxInstances: 2500,
				Policies:      scaler.FixedPolicy(policy.Policy{IdleCount: 10000, IdleTime: time.Hour, Preemptive: true}),
				ThrottleLimit: 1e6, ThrottleBurst: 10000}
			f := fleet.New(scaler.New(cfg, time.Now()), fleet.Options{Provider: group, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
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
		})
	}
}

// BenchmarkConnectInfo measures ConnectInfo calls on one running instance,
// built in and through the plugin, from many goroutines.
func BenchmarkConnectInfo(b *testing.B) {
	for _, name := range []string{"builtin", "plugin"} {
		b.Run(name, func(b *testing.B) {
			g := benchGroup(b, name)
			ctx := context.Background()
			if _, err := g.Increase(ctx, 1); err != nil {
				b.Fatal(err)
			}
			var id string
			for id == "" {
				g.Update(ctx, func(i string, s provider.State) {
					if s == provider.StateRunning {
						id = i
					}
				})
			}
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := g.ConnectInfo(ctx, id); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}
