//go:build linux

package local_test

import (
	"context"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
)

// A long-running berth boots and deletes instances for weeks: the readiness
// watcher must report each ready instance and then hold no watch for it,
// and an instance deleted while it boots must not leave its watch behind.
func TestNotifyReportsReadyInstancesAndKeepsNoWatches(t *testing.T) {
	p := newGroup(t, t.TempDir(), "")
	ready := make(chan string, 10)
	p.Notify(func(id string, s provider.State) {
		if s == provider.StateRunning {
			ready <- id
		}
	})
	defer p.Notify(nil)
	ctx := context.Background()

	if n, err := p.Increase(ctx, 2); err != nil || n != 2 {
		t.Fatalf("Increase(2) = %d, %v", n, err)
	}
	reported := map[string]bool{}
	for len(reported) < 2 {
		select {
		case id := <-ready:
			reported[id] = true
			if st := states(t, p)[id]; st != provider.StateRunning {
				t.Errorf("%s reported running but listed %q", id, st)
			}
		case <-time.After(time.Minute):
			t.Fatalf("only %d of 2 new instances reported running within a minute", len(reported))
		}
	}

	// Delete one instance as soon as it exists, most likely while it boots.
	before := states(t, p)
	if n, err := p.Increase(ctx, 1); err != nil || n != 1 {
		t.Fatalf("Increase(1) = %d, %v", n, err)
	}
	for id := range states(t, p) {
		if _, old := before[id]; !old {
			if _, err := p.Decrease(ctx, []string{id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(time.Minute)
	for local.Watches(p) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d instance directories still watched after every instance is ready or deleted", local.Watches(p))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
