// Package oneshot runs functions once something happened, without a
// goroutine waiting for it. berth watches every running job for a cancel
// and for the loss of its instance; a goroutine blocked on a channel for
// each would hold a stack (4–8 KiB) per job for the job's whole run.
package oneshot

import "sync"

// Hooks runs the functions given to After once Fire is called. The zero
// value is ready to use; a Hooks must not be copied after first use.
type Hooks struct {
	mu    sync.Mutex
	fired bool
	fns   []func()
}

// After arranges for f to run in its own goroutine once Fire is called,
// at once if it was. Like context.AfterFunc, the returned stop unregisters
// f and reports whether that kept f from being started: false once Fire
// ran (f runs or ran) or stop was called before.
func (h *Hooks) After(f func()) (stop func() bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fired {
		go f()
		return func() bool { return false }
	}
	i := len(h.fns)
	h.fns = append(h.fns, f)
	return func() bool { return h.remove(i) }
}

func (h *Hooks) remove(i int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fired || h.fns[i] == nil {
		return false
	}
	h.fns[i] = nil // kept as a hole: the other stops hold their indices
	return true
}

// Fire starts every registered function, each in its own goroutine (the
// caller may hold locks the functions need). Later calls do nothing.
func (h *Hooks) Fire() {
	h.mu.Lock()
	if h.fired {
		h.mu.Unlock()
		return
	}
	h.fired = true
	fns := h.fns
	h.fns = nil
	h.mu.Unlock()
	for _, f := range fns {
		if f != nil {
			go f()
		}
	}
}
