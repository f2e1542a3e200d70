package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/ha"
	"github.com/berth-ci/berth/internal/etcdtest"
	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
	"github.com/berth-ci/berth/store"
)

// haManager is one manager of the fleet in etcd: its own client, elector
// and store, as a separate process would have.
type haManager struct {
	cli   *clientv3.Client
	el    *ha.Elector
	store *ha.Store
}

func newHAManager(t *testing.T, c *etcdtest.Cluster, name string) *haManager {
	t.Helper()
	cli := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := ha.OpenStore(ctx, cli, "/berth/")
	if err != nil {
		t.Fatal(err)
	}
	return &haManager{cli: cli, store: s,
		el: ha.NewElector(cli, "/berth/", 2*time.Second, name, slog.New(slog.NewTextHandler(io.Discard, nil)))}
}

func (m *haManager) lead(t *testing.T) *ha.Term {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	term, err := m.el.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { term.Resign(context.Background()) })
	return term
}

// Manager A runs the fleet on the state in etcd, then is paused (its view
// of its term never ends, as in a process stopped before its etcd client
// noticed anything); its lease expires, manager B takes over and saves.
// A's next step wants to delete an instance: etcd refuses A's save, and A
// makes no provider call, now or later.
func TestOldLeaderMakesNoProviderCallAfterATakeover(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := newHAManager(t, c, "a"), newHAManager(t, c, "b")
	term := a.lead(t)
	fence := term.Fence()
	a.store.SetFence(&ha.Fence{Key: fence.Key, Rev: fence.Rev, Ctx: context.Background()})
	prov := newCallLog()
	f := newFencingFleet(t, a.store, prov)
	acq := f.start(t, "job-1")

	// A's lease ends (etcd expires it; revoked here so the test need not
	// wait for the TTL) and B takes over from the state A left.
	won := make(chan *ha.Term, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		term, err := b.el.Campaign(ctx)
		if err != nil {
			t.Error(err)
		}
		won <- term
	}()
	if _, err := a.cli.Revoke(context.Background(), clientv3.LeaseID(term.Lease())); err != nil {
		t.Fatal(err)
	}
	bterm := <-won
	if bterm == nil {
		t.FailNow()
	}
	t.Cleanup(func() { bterm.Resign(context.Background()) })
	b.store.SetFence(bterm.Fence())
	st, ok, err := b.store.Load()
	if err != nil || !ok || len(st.Instances) != 1 || len(st.Reservations) != 1 {
		t.Fatalf("B loaded %+v (ok=%v, err=%v); want A's instance and booking", st, ok, err)
	}
	if err := b.store.Save(st); err != nil {
		t.Fatal(err)
	}
	bSaved := prov.made()

	// A wakes up and goes on with its next step.
	err = f.Discard("job-1", "the job broke its instance")
	if !errors.Is(err, ErrStopped) || !errors.Is(err, store.ErrFenced) || !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("A's Discard after B took over: %v; want ErrStopped wrapping ha.ErrFenced", err)
	}
	f.stopped(t)
	if after := prov.made(); len(after) != len(bSaved) {
		t.Fatalf("A's provider calls after B's first save: %v; want none", after[len(bSaved):])
	}
	for _, in := range prov.Instances() {
		if in.ID == acq.Instance && in.State != provider.StateRunning {
			t.Fatalf("A's instance %s is %s; want running, B's to manage", in.ID, in.State)
		}
	}
	if got, _, err := b.store.Load(); err != nil || len(got.Instances) != 1 {
		t.Fatalf("state after A's refused step: %+v, %v; want B's, unchanged", got, err)
	}
}

// The old leader's next step needs no save: a heartbeat of its idle
// instance, which changes nothing durable. Right before the call the fleet
// asks etcd whether it still leads (its last proof is older than
// ha.ConfirmAfter), learns it does not, and stops without calling.
func TestOldLeaderChecksWithEtcdBeforeACallWithoutASave(t *testing.T) {
	c := etcdtest.Start(t, 1)
	a, b := newHAManager(t, c, "a"), newHAManager(t, c, "b")
	term := a.lead(t)
	fence := term.Fence()
	a.store.SetFence(&ha.Fence{Key: fence.Key, Rev: fence.Rev, Ctx: context.Background()})
	prov := newCallLog()
	cfg := scaler.Config{MaxInstances: 1, CapacityPerInstance: 1, HeartbeatInterval: 20 * time.Millisecond, FailureThreshold: 3,
		Policies: scaler.FixedPolicy(policy.Policy{IdleCount: 1, IdleTime: time.Hour})}
	f := newFencingFleetWith(t, cfg, a.store, prov)
	waitUntil(t, "a heartbeat of the idle instance", func() bool {
		return slices.ContainsFunc(prov.made(), func(c string) bool { return strings.HasPrefix(c, "heartbeat") })
	})

	if _, err := a.cli.Revoke(context.Background(), clientv3.LeaseID(term.Lease())); err != nil {
		t.Fatal(err)
	}
	// From now on A's last proof of leadership is stale: every call it
	// makes must first be confirmed by etcd, which no longer holds its key.
	time.Sleep(2 * ha.ConfirmAfter)
	bterm := b.lead(t)
	b.store.SetFence(bterm.Fence())
	st, _, err := b.store.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.Save(st); err != nil {
		t.Fatal(err)
	}
	bSaved := prov.made()
	f.stopped(t)
	if after := prov.made(); len(after) != len(bSaved) {
		t.Fatalf("A's provider calls after B's first save: %v; want none", after[len(bSaved):])
	}
	if err := f.Err(); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("A stopped with %v; want ha.ErrFenced from the check before a call", err)
	}
}
