package ha

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/scaler"
)

func instances(ids ...string) scaler.State {
	var st scaler.State
	for _, id := range ids {
		st.Instances = append(st.Instances, scaler.InstanceRecord{ID: id, Phase: "ready", Created: time.Unix(0, 0).UTC()})
	}
	return st
}

// waitDone waits for a term to end; the bound only keeps a broken build
// from hanging.
func waitDone(t *testing.T, term *Term) {
	t.Helper()
	select {
	case <-term.Context().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the term did not end although its lease is gone")
	}
}

// Leader A is paused (its lease expires: revoked here, as etcd does when
// no keepalive arrives for the TTL); B takes over and saves. A, resuming
// with a stale view that still says it leads, writes: etcd refuses it, and
// the shared state is B's.
func TestPausedLeaderCannotWriteAfterTakeover(t *testing.T) {
	p := newPrefix(t)
	a := newManager(t, p, "a")
	b := newManager(t, p, "b")
	a.lead(t)
	if err := a.store.Save(instances("from-a")); err != nil {
		t.Fatal(err)
	}
	staleFence := &Fence{Key: a.term.Fence().Key, Rev: a.term.Fence().Rev, Ctx: context.Background()}

	won := make(chan *Term, 1)
	go func() {
		term, err := b.el.Campaign(testCtx(t))
		if err != nil {
			t.Error(err)
		}
		won <- term
	}()
	if b.el.Role() != RoleStandby || a.el.Role() != RoleLeader {
		t.Fatalf("roles before the pause: a=%s b=%s", a.el.Role(), b.el.Role())
	}
	if _, err := a.cli.Revoke(testCtx(t), clientv3.LeaseID(a.term.Lease())); err != nil {
		t.Fatal(err)
	}
	waitDone(t, a.term)
	if cause := context.Cause(a.term.Context()); !errors.Is(cause, ErrLeaseLost) {
		t.Fatalf("a's term ended with %v, want ErrLeaseLost", cause)
	}
	if a.el.Role() != RoleStandby {
		t.Fatalf("a says %s after losing its lease", a.el.Role())
	}

	b.term = <-won
	if b.term == nil {
		t.FailNow()
	}
	t.Cleanup(func() { b.term.Resign(context.Background()) })
	b.store.SetFence(b.term.Fence())
	if err := b.store.Save(instances("from-b")); err != nil {
		t.Fatal(err)
	}

	// A's own store knows its term ended and does not even ask etcd.
	if err := a.store.Save(instances("from-a", "a-again")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("save after the term ended: %v, want ErrNotLeader", err)
	}
	// A paused before it could notice: etcd itself refuses the write.
	a.store.SetFence(staleFence)
	if err := a.store.Save(instances("from-a", "a-again")); !errors.Is(err, ErrFenced) {
		t.Fatalf("save with the old fence: %v, want ErrFenced", err)
	}
	got, _, err := b.store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Instances) != 1 || got.Instances[0].ID != "from-b" {
		t.Fatalf("shared state after the refused write: %+v, want only B's instance", got.Instances)
	}
}

// A standby's store writes nothing.
func TestStandbyCannotSave(t *testing.T) {
	m := newManager(t, newPrefix(t), "a")
	if err := m.store.Save(instances("x")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("save without leading: %v, want ErrNotLeader", err)
	}
	if _, ok, err := m.store.Load(); ok || err != nil {
		t.Fatalf("load after the refused save: ok=%v err=%v", ok, err)
	}
}

// Managers racing for one prefix lead one after the other: each new
// leader reads the state its predecessor left and adds to it, so no write
// is lost and no two terms overlap.
func TestTermsNeverOverlap(t *testing.T) {
	p := newPrefix(t)
	ms := []*manager{newManager(t, p, "a"), newManager(t, p, "b"), newManager(t, p, "c")}
	leaders := make(chan string, 3)
	for i, m := range ms {
		go func() {
			term, err := m.el.Campaign(testCtx(t))
			if err != nil {
				t.Error(err)
				leaders <- ""
				return
			}
			m.store.SetFence(term.Fence())
			name := string(rune('a' + i))
			// Every other manager is a standby while this one leads.
			for _, o := range ms {
				if o != m && o.el.Role() == RoleLeader {
					t.Errorf("%s leads while another manager does too", name)
				}
			}
			st, _, err := m.store.Load()
			if err != nil {
				t.Error(err)
			}
			st.Instances = append(st.Instances, instances(name).Instances...)
			if err := m.store.Save(st); err != nil {
				t.Error(err)
			}
			if err := term.Resign(testCtx(t)); err != nil {
				t.Error(err)
			}
			leaders <- name
		}()
	}
	for range ms {
		<-leaders
	}
	got, _, err := ms[0].store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Instances) != 3 {
		t.Fatalf("state after three terms: %+v, want one instance from each leader", got.Instances)
	}
}

// Confirm asks etcd itself: once the election key is gone (here deleted by
// hand; as after a lease expiry this manager has not noticed yet) it
// refuses with ErrFenced and ends the term, although the session lives.
func TestConfirmSeesTheKeyGoneBeforeTheSessionDoes(t *testing.T) {
	a := newManager(t, newPrefix(t), "a")
	a.lead(t)
	if err := a.term.Confirm(testCtx(t)); err != nil {
		t.Fatalf("Confirm while leading: %v", err)
	}
	if _, err := a.cli.Delete(testCtx(t), a.term.Fence().Key); err != nil {
		t.Fatal(err)
	}
	if err := a.term.Confirm(testCtx(t)); !errors.Is(err, ErrFenced) {
		t.Fatalf("Confirm after the key went: %v, want ErrFenced", err)
	}
	waitDone(t, a.term)
	if c := context.Cause(a.term.Context()); !errors.Is(c, ErrLeaseLost) {
		t.Errorf("term ended with %v, want ErrLeaseLost", c)
	}
}
