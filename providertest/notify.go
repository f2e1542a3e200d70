package providertest

import (
	"context"
	"sync"
	"time"

	"github.com/berth-ci/berth/provider"
)

// notify checks a provider that claims Capabilities.Notify: it must
// implement provider.Notifier and report every instance that becomes
// running, after Increase and after Resume, and only once Update lists the
// instance running too. A provider that does not claim it passes at once.
func (s *suite) notify(t T) {
	if !s.info.Capabilities.Notify {
		return
	}
	n, ok := s.g.(provider.Notifier)
	if !ok {
		t.Fatalf("Info.Capabilities.Notify is true but %T does not implement provider.Notifier", s.g)
	}
	ns := &notices{arrived: make(chan struct{})}
	n.Notify(ns.add)
	defer n.Notify(nil)
	ctx := context.Background()

	before := s.listing(t)
	if got, err := s.g.Increase(ctx, 1); err != nil || got != 1 {
		t.Fatalf("Increase(1) = %d, %v; want 1, nil", got, err)
	}
	var id string
	defer func() {
		if id == "" { // failed before the new instance was reported
			for got := range s.listing(t) {
				if _, old := before[got]; !old {
					id = got
				}
			}
		}
		if id != "" {
			s.g.Decrease(context.Background(), []string{id})
		}
	}()
	id = s.expectRunning(t, ns, 0, func(got string) bool { _, old := before[got]; return !old })

	sus, ok := s.g.(provider.Suspender)
	if !ok || !s.info.Capabilities.Suspend {
		return
	}
	if acc, err := sus.Suspend(ctx, []string{id}); err != nil || len(acc) != 1 {
		t.Fatalf("Suspend(%s) = %v, %v", id, acc, err)
	}
	s.waitListed(t, id, provider.StateSuspended)
	mark := ns.mark()
	if acc, err := sus.Resume(ctx, []string{id}); err != nil || len(acc) != 1 {
		t.Fatalf("Resume(%s) = %v, %v", id, acc, err)
	}
	s.expectRunning(t, ns, mark, func(got string) bool { return got == id })
}

// notices records what the provider reports.
type notices struct {
	mu      sync.Mutex
	got     []notice
	arrived chan struct{} // closed and replaced on each notice
}

type notice struct {
	id    string
	state provider.State
}

func (ns *notices) add(id string, st provider.State) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	ns.got = append(ns.got, notice{id, st})
	close(ns.arrived)
	ns.arrived = make(chan struct{})
}

// mark returns a position in the notices; expectRunning looks only after it.
func (ns *notices) mark() int {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return len(ns.got)
}

func (ns *notices) since(mark int) []notice {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return append([]notice(nil), ns.got[mark:]...)
}

// expectRunning waits until an instance that matches was reported running
// after mark and returns its ID; the listing right after the report must
// show it running too.
func (s *suite) expectRunning(t T, ns *notices, mark int, match func(id string) bool) string {
	t.Helper()
	deadline := time.After(s.timeout)
	for next := mark; ; {
		ns.mu.Lock()
		fresh := append([]notice(nil), ns.got[next:]...)
		next = len(ns.got)
		arrived := ns.arrived
		ns.mu.Unlock()
		for _, no := range fresh {
			if !no.state.Valid() {
				t.Errorf("Notify reported instance %s in invalid state %q", no.id, no.state)
			}
			if no.state != provider.StateRunning || !match(no.id) {
				continue
			}
			if st := s.listing(t)[no.id]; st != provider.StateRunning {
				t.Errorf("Notify reported %s running, but Update then lists it %q", no.id, st)
			}
			return no.id
		}
		select {
		case <-arrived:
		case <-deadline:
			t.Fatalf("Info.Capabilities.Notify is true, but no instance was reported running within %v (notifications: %v; listing: %v)",
				s.timeout, ns.since(mark), s.listing(t))
		}
	}
}

// listing returns the group's current listing.
func (s *suite) listing(t T) map[string]provider.State {
	t.Helper()
	got := map[string]provider.State{}
	if err := s.g.Update(context.Background(), func(id string, st provider.State) { got[id] = st }); err != nil {
		t.Fatalf("Update: %v", err)
	}
	return got
}

// waitListed polls Update until id is listed in state want.
func (s *suite) waitListed(t T, id string, want provider.State) {
	t.Helper()
	deadline := time.Now().Add(s.timeout)
	for {
		st := s.listing(t)[id]
		if st == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s to be %q; it is %q", s.timeout, id, want, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
