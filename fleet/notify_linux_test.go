//go:build linux

package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
	"github.com/berth-ci/berth/providertest"
	"github.com/berth-ci/berth/scaler"
)

func TestMain(m *testing.M) {
	local.RunSandboxIfRequested()
	os.Exit(m.Run())
}

// localFleet runs a fleet on real local sandboxes. The periodic listing is
// an hour apart, so an instance is seen ready only when the provider says
// so (or when updateInterval is set shorter).
func localFleet(tb testing.TB, cfg scaler.Config, updateInterval time.Duration) *Fleet {
	tb.Helper()
	dir := tb.TempDir()
	p := local.New()
	info, err := p.Init(context.Background(), provider.Settings{StateDir: dir})
	if err != nil {
		tb.Fatalf("Init: %v", err)
	}
	if !info.Capabilities.Notify {
		tb.Fatal("the local provider does not claim Capabilities.Notify on this kernel")
	}
	f := New(scaler.New(cfg, time.Now()), Options{Provider: p, UpdateInterval: updateInterval, TickInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	tb.Cleanup(func() {
		cancel()
		<-done
		var ids []string
		p.Update(context.Background(), func(id string, _ provider.State) { ids = append(ids, id) })
		p.Decrease(context.Background(), ids)
		p.Shutdown(context.Background())
	})
	return f
}

func coldConfig() scaler.Config {
	return scaler.Config{MaxInstances: 2, MaxUseCount: 1,
		Policies: scaler.FixedPolicy(policy.Policy{IdleTime: time.Minute})}
}

func TestNotifiedReadinessBindsWithoutAListingInterval(t *testing.T) {
	// The listing after the Increase sees the sandbox still booting; the
	// next periodic one is an hour away. Only the provider's notification
	// can make the instance ready for this booking.
	f := localFleet(t, coldConfig(), time.Hour)
	if err := f.Reserve("job-1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acq, err := f.Acquire(ctx, "job-1")
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	res, err := providertest.Exec(ctx, acq.Connect, "hostname", nil)
	if err != nil || res.Stdout != acq.Instance+"\n" {
		t.Fatalf("hostname on %s: %q, %v", acq.Instance, res.Stdout, err)
	}
	if err := f.Release("job-1"); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkPickup measures Reserve → Acquire → a command starting over SSH
// on the local provider: "cold" boots a sandbox for every booking (on-demand,
// no idle instance, max_use_count 1), "hot" finds an idle ready one. The
// listing interval is the daemon's 2 s, so cold pickups are fast only when
// readiness is pushed. It reports p50 and p95 besides the mean.
//
//	go test -run XXX -bench Pickup -benchtime 40x ./fleet/
func BenchmarkPickup(b *testing.B) {
	b.Run("cold", func(b *testing.B) {
		benchPickup(b, coldConfig(), 0)
	})
	b.Run("hot", func(b *testing.B) {
		benchPickup(b, scaler.Config{MaxInstances: 2,
			Policies: scaler.FixedPolicy(policy.Policy{IdleCount: 1, IdleTime: time.Hour, Preemptive: true})}, 1)
	})
}

// benchPickup times one pickup per iteration; between iterations it waits,
// untimed, until nothing boots or drains and at least idle instances are
// ready (none for idle 0), so every cold pickup boots and every hot one
// finds a warm slot.
func benchPickup(b *testing.B, cfg scaler.Config, idle int) {
	f := localFleet(b, cfg, 2*time.Second)
	ctx := context.Background()
	settle := func() {
		deadline := time.Now().Add(time.Minute)
		for {
			c := f.Counts()
			ready := c.InstancesByPhase["ready"]
			if len(f.Instances()) == ready && c.Pending == 0 && ready >= idle && (idle > 0 || ready == 0) {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("fleet did not settle with %d idle instances: %+v", idle, c)
			}
			time.Sleep(time.Millisecond)
		}
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		settle()
		key := fmt.Sprintf("job-%d", i)
		b.StartTimer()
		start := time.Now()
		if err := f.Reserve(key); err != nil {
			b.Fatal(err)
		}
		acq, err := f.Acquire(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := providertest.Exec(ctx, acq.Connect, "true", nil); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
		b.StopTimer()
		if err := f.Release(key); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[min(len(took)-1, len(took)*95/100)].Microseconds())/1000, "p95-ms")
}
