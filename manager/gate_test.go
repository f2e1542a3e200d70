package manager

import (
	"context"
	"errors"
	"testing"

	"github.com/berth-ci/berth/provider"
)

// Once the manager may not act, no call reaches the provider but Shutdown,
// which releases berth's side only; while it may, every call does.
func TestGateRefusesEveryCallOnceTheTermIsGone(t *testing.T) {
	sim, err := provider.New("counting-sim")
	if err != nil {
		t.Fatal(err)
	}
	inner := sim.(*countingGroup)
	var gone error
	g := gate(inner, func(context.Context) error { return gone })
	ctx := context.Background()
	if _, err := g.Init(ctx, provider.Settings{}); err != nil {
		t.Fatal(err)
	}
	if err := g.Update(ctx, func(string, provider.State) {}); err != nil {
		t.Fatal(err)
	}
	if n := inner.calls.Load(); n != 2 {
		t.Fatalf("%d calls passed while leading, want 2", n)
	}

	gone = errStandby
	calls := []func() error{
		func() error { return g.Update(ctx, func(string, provider.State) {}) },
		func() error { _, err := g.Increase(ctx, 1); return err },
		func() error { _, err := g.Decrease(ctx, []string{"i-1"}); return err },
		func() error { _, err := g.ConnectInfo(ctx, "i-1"); return err },
		func() error { return g.Heartbeat(ctx, "i-1") },
		func() error { _, err := g.Suspend(ctx, []string{"i-1"}); return err },
		func() error { _, err := g.Resume(ctx, []string{"i-1"}); return err },
		func() error { return g.Recycle(ctx, "i-1") },
	}
	for i, call := range calls {
		if err := call(); !errors.Is(err, errStandby) && !errors.Is(err, errNotSupported) {
			t.Errorf("call %d after the term: %v, want refused", i, err)
		}
	}
	if n := inner.calls.Load(); n != 2 {
		t.Errorf("%d calls reached the provider after the term ended", n-2)
	}
	if err := g.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown after the term: %v", err)
	}
}
