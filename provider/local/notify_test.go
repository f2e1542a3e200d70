//go:build linux

package local_test

import (
	"context"
	"os"
	"syscall"
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

// An instance still booting when berth restarts is reported by the new
// provider too. The sandbox is stopped (SIGSTOP) before it is ready, so the
// new provider surely finds it booting, and continued once it listens.
func TestNotifyReportsInstancesBootingAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	p1 := newGroup(t, dir, "")
	ctx := context.Background()
	var id string
	var proc *os.Process
	for try := 0; id == "" && try < 20; try++ {
		before := states(t, p1)
		if n, err := p1.Increase(ctx, 1); err != nil || n != 1 {
			t.Fatalf("Increase(1) = %d, %v", n, err)
		}
		for got := range states(t, p1) {
			if _, old := before[got]; !old {
				id = got
			}
		}
		m := readMeta(t, dir, id)
		proc, _ = os.FindProcess(m.PID)
		if err := proc.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if states(t, p1)[id] == provider.StateRunning {
			// Ready before it stopped; try another.
			proc.Signal(syscall.SIGCONT)
			id = ""
		}
	}
	if id == "" {
		t.Fatal("every sandbox was ready before it could be stopped")
	}
	p1.Shutdown(ctx)

	p2 := newGroup(t, dir, "")
	ready := make(chan string, 10)
	p2.Notify(func(got string, s provider.State) {
		if s == provider.StateRunning {
			ready <- got
		}
	})
	defer p2.Notify(nil)
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case got := <-ready:
			if got != id {
				continue
			}
			if st := states(t, p2)[id]; st != provider.StateRunning {
				t.Errorf("%s reported running but listed %q", id, st)
			}
			return
		case <-time.After(time.Minute):
			t.Fatalf("%s, booting across the restart, was not reported running within a minute (listed %q)", id, states(t, p2)[id])
		}
	}
}
