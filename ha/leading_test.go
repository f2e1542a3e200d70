package ha

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/store"
)

// The fleet branches on store.ErrFenced without importing ha: both of ha's
// refusals match it, and each still matches itself only.
func TestFencingErrorsMatchTheStoreSentinel(t *testing.T) {
	for _, err := range []error{ErrFenced, ErrNotLeader} {
		wrapped := errorsJoin("save berth state", err)
		if !errors.Is(wrapped, store.ErrFenced) || !errors.Is(wrapped, err) {
			t.Errorf("%v: errors.Is(store.ErrFenced)=%v, itself=%v; want both", err, errors.Is(wrapped, store.ErrFenced), errors.Is(wrapped, err))
		}
	}
	if errors.Is(ErrFenced, ErrNotLeader) || errors.Is(ErrNotLeader, ErrFenced) {
		t.Error("ErrFenced and ErrNotLeader match each other; a caller could not tell them apart")
	}
}

func errorsJoin(what string, err error) error { return errors.Join(errors.New(what), err) }

// Leading says whether the manager still leads right before a provider
// call. A paused leader whose term context still looks alive (it has not
// noticed the lease is gone) learns it from etcd, once its last proof of
// leadership is older than ConfirmAfter.
func TestLeadingAsksEtcdOnceItsProofIsOld(t *testing.T) {
	p := newPrefix(t)
	a := newManager(t, p, "a")
	if err := a.store.Leading(); !errors.Is(err, ErrNotLeader) || !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Leading of a standby: %v, want ErrNotLeader matching store.ErrFenced", err)
	}
	a.lead(t)
	if err := a.store.Leading(); err != nil {
		t.Fatalf("Leading of the leader: %v", err)
	}
	if err := a.store.Save(instances("from-a")); err != nil {
		t.Fatal(err)
	}
	// A stale view: the fence A won with, under a context that never ends,
	// as a paused process would have before its client noticed anything.
	stale := &Fence{Key: a.term.Fence().Key, Rev: a.term.Fence().Rev, Ctx: context.Background()}
	a.store.SetFence(stale)
	if err := a.store.Leading(); err != nil {
		t.Fatalf("Leading with the fence still held in etcd: %v", err)
	}
	if _, err := a.cli.Revoke(testCtx(t), clientv3.LeaseID(a.term.Lease())); err != nil {
		t.Fatal(err)
	}
	waitDone(t, a.term)
	b := newManager(t, p, "b")
	b.lead(t)
	time.Sleep(ConfirmAfter) // A's last proof grows old, as in a pause
	err := a.store.Leading()
	if !errors.Is(err, ErrFenced) || !errors.Is(err, store.ErrFenced) {
		t.Fatalf("Leading after another manager took over: %v, want ErrFenced", err)
	}
	if err := b.store.Leading(); err != nil {
		t.Fatalf("Leading of the new leader: %v", err)
	}
}
