package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
)

// BenchmarkUpdate2500 lists a group of 2,500 instances in mixed states, the
// call a scaler makes on every tick.
func BenchmarkUpdate2500(b *testing.B) {
	clk := newClock()
	g := New(Config{BootTime: time.Minute, BootJitter: time.Minute, SupportsSuspend: true, Seed: 1}, clk.now)
	if n, err := g.Increase(ctx, 2500); n != 2500 || err != nil {
		b.Fatal(n, err)
	}
	clk.add(90 * time.Second)
	var seen int
	fn := func(string, provider.State) { seen++ }
	b.ReportAllocs()
	for b.Loop() {
		seen = 0
		if err := g.Update(ctx, fn); err != nil {
			b.Fatal(err)
		}
	}
	if seen != 2500 {
		b.Fatalf("listed %d, want 2500", seen)
	}
}

// BenchmarkChurn is the bench's steady state with about 1,000 instances
// alive: each virtual second one instance is asked for and the oldest is
// deleted, and the loop asks when the next event is due.
func BenchmarkChurn(b *testing.B) {
	clk := newClock()
	g := New(Config{BootTime: time.Minute, BootJitter: 30 * time.Second, ListingLag: 5 * time.Second,
		DeleteLatency: 20 * time.Second, MeanTimeToFailure: 24 * time.Hour, Seed: 1}, clk.now)
	g.Increase(ctx, 1000)
	oldest := 0
	ids := make([]string, 1)
	b.ReportAllocs()
	for b.Loop() {
		clk.add(time.Second)
		if g.NextEventTime().IsZero() {
			b.Fatal("no next event with instances booting")
		}
		g.Increase(ctx, 1)
		oldest++
		ids[0] = fmt.Sprintf("sim-%06d", oldest)
		g.Decrease(ctx, ids) // may already have failed on its own
	}
	if live := g.Stats().Live; live < 900 || live > 1050 {
		b.Fatalf("%d instances alive, want about 1000", live)
	}
}
