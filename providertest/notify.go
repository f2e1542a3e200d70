package providertest

import (
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
)

// notices records what a provider that claims Capabilities.Notify reports
// through provider.Notifier, so the suite can check that every instance
// that becomes running is reported, and only once Update lists it so.
type notices struct {
	mu      sync.Mutex
	got     []notice
	arrived chan struct{} // closed and replaced on each notice
}

type notice struct {
	id    string
	state provider.State
}

// watchNotices registers with the group when it claims to notify, and
// returns nil otherwise. A group that claims it without implementing
// provider.Notifier fails the suite.
func (s *suite) watchNotices(t *testing.T) *notices {
	n, ok := s.g.(provider.Notifier)
	if !s.info.Capabilities.Notify {
		return nil
	}
	if !ok {
		t.Errorf("Info.Capabilities.Notify is true but %T does not implement provider.Notifier", s.g)
		return nil
	}
	ns := &notices{arrived: make(chan struct{})}
	n.Notify(func(id string, st provider.State) {
		if !st.Valid() {
			t.Errorf("Notify reported instance %s in invalid state %q", id, st)
		}
		ns.mu.Lock()
		defer ns.mu.Unlock()
		ns.got = append(ns.got, notice{id, st})
		close(ns.arrived)
		ns.arrived = make(chan struct{})
	})
	t.Cleanup(func() { n.Notify(nil) })
	return ns
}

// mark returns a position in the notices; expectRunning looks only after it.
func (ns *notices) mark() int {
	if ns == nil {
		return 0
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return len(ns.got)
}

// expectRunning waits until n distinct instances that match were reported
// running after mark, and checks on each report that Update then lists the
// instance running too: a notification may come only once Update would
// show the change. It does nothing for a group that does not claim to
// notify.
func (s *suite) expectRunning(t *testing.T, mark, n int, match func(id string) bool) {
	t.Helper()
	ns := s.notes
	if ns == nil {
		return
	}
	deadline := time.After(s.timeout)
	seen := map[string]bool{}
	for next := mark; len(seen) < n; {
		ns.mu.Lock()
		fresh := append([]notice(nil), ns.got[next:]...)
		next = len(ns.got)
		arrived := ns.arrived
		ns.mu.Unlock()
		for _, no := range fresh {
			if no.state != provider.StateRunning || !match(no.id) || seen[no.id] {
				continue
			}
			seen[no.id] = true
			if st := s.list(t)[no.id]; st != provider.StateRunning {
				t.Errorf("Notify reported %s running, but Update then lists it %q", no.id, st)
			}
		}
		if len(seen) >= n {
			break
		}
		select {
		case <-arrived:
		case <-deadline:
			t.Fatalf("Info.Capabilities.Notify is true, but after %v only %d of %d instances were reported running (notifications since: %v)",
				s.timeout, len(seen), n, ns.since(mark))
		}
	}
}

func (ns *notices) since(mark int) []notice {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return append([]notice(nil), ns.got[mark:]...)
}
