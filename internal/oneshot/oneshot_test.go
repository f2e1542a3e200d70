package oneshot

import (
	"sync"
	"testing"
	"time"
)

// ran returns a function that closes ch when run.
func ran(ch chan struct{}) func() { return func() { close(ch) } }

func waitRun(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never ran", what)
	}
}

func TestFireRunsEveryRegisteredFunctionOnce(t *testing.T) {
	var h Hooks
	a, b := make(chan struct{}), make(chan struct{})
	h.After(ran(a))
	h.After(ran(b))
	h.Fire()
	h.Fire() // a second close would panic
	waitRun(t, a, "the first function")
	waitRun(t, b, "the second function")
}

func TestAfterFireRunsAtOnce(t *testing.T) {
	var h Hooks
	h.Fire()
	ch := make(chan struct{})
	stop := h.After(ran(ch))
	waitRun(t, ch, "a function registered after Fire")
	if stop() {
		t.Error("stop after Fire said it kept the function from running")
	}
}

func TestStopKeepsOnlyItsFunctionFromRunning(t *testing.T) {
	var h Hooks
	stopped := h.After(func() { t.Error("a stopped function ran") })
	kept := make(chan struct{})
	h.After(ran(kept))
	if !stopped() {
		t.Fatal("stop before Fire reported false")
	}
	if stopped() {
		t.Error("a second stop reported true")
	}
	h.Fire()
	waitRun(t, kept, "the function not stopped")
}

func TestStopRacingFireRunsTheFunctionOrReportsTrue(t *testing.T) {
	for range 200 {
		var (
			h  Hooks
			wg sync.WaitGroup
		)
		wg.Add(1)
		stop := h.After(wg.Done)
		go h.Fire()
		if stop() {
			wg.Done() // it will never run
		}
		wg.Wait()
	}
}
