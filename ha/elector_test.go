package ha

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/internal/etcdtest"
)

// A leader that resigns hands over at once (no TTL to wait), standbys
// see who leads, and the resigned manager stops acting first.
func TestResignHandsOverAndObserversFollow(t *testing.T) {
	p := newPrefix(t)
	a := newManager(t, p, "http://a:8765")
	b := newManager(t, p, "http://b:8765")
	obs, err := b.el.Observe(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	a.lead(t)
	if got := <-obs; got != "http://a:8765" {
		t.Fatalf("observed leader %q, want a", got)
	}
	if name, err := b.el.Leader(testCtx(t)); err != nil || name != "http://a:8765" {
		t.Fatalf("Leader() = %q, %v", name, err)
	}

	won := make(chan *Term, 1)
	go func() {
		term, err := b.el.Campaign(testCtx(t))
		if err != nil {
			t.Error(err)
		}
		won <- term
	}()
	if err := a.term.Resign(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if cause := context.Cause(a.term.Context()); !errors.Is(cause, ErrResigned) {
		t.Fatalf("a's term ended with %v, want ErrResigned", cause)
	}
	if a.el.Role() != RoleStandby {
		t.Fatalf("a says %s after resigning", a.el.Role())
	}
	b.term = <-won
	if b.term == nil {
		t.FailNow()
	}
	defer b.term.Resign(context.Background())
	if b.el.Role() != RoleLeader {
		t.Fatalf("b says %s after winning", b.el.Role())
	}
	if got := <-obs; got != "http://b:8765" {
		t.Fatalf("observed leader %q, want b", got)
	}
}

// etcd goes away under a leader: its term ends within about the lease TTL
// (the client gives the lease up when no keepalive is answered), so the
// leader stops acting; and with etcd back, a campaign leads again.
func TestLeaderStopsWhenEtcdIsGone(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own etcd")
	}
	c := etcdtest.Start(t, 1)
	cli := c.Client(t)
	s, err := OpenStore(testCtx(t), cli, "/berth/")
	if err != nil {
		t.Fatal(err)
	}
	el := NewElector(cli, "/berth/", testTTL, "a", quiet())
	term, err := el.Campaign(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	s.SetFence(term.Fence())
	if err := s.Save(instances("i1")); err != nil {
		t.Fatal(err)
	}
	c.Stop() // returns once etcd has stopped serving
	start := time.Now()
	waitDone(t, term)
	t.Logf("term ended %s after etcd stopped (lease TTL %s)", time.Since(start).Round(time.Millisecond), testTTL)
	if cause := context.Cause(term.Context()); !errors.Is(cause, ErrLeaseLost) {
		t.Fatalf("term ended with %v, want ErrLeaseLost", cause)
	}
	if err := s.Save(instances("i1", "i2")); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("save with etcd gone after the term ended: %v, want ErrNotLeader", err)
	}
}

// etcd is wiped (stopped, its data lost, started empty) while one
// manager leads and another waits as a standby, and the leader never comes
// back: the standby's lease ended with the wipe, so it campaigns again on
// the new cluster and leads, rather than waiting for ever for the old
// leader's key to go at a revision the new cluster has not reached.
func TestStandbyWhoseLeaseEndedCampaignsAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own etcd")
	}
	c := etcdtest.Start(t, 1)
	a := NewElector(c.Client(t), "/berth/", testTTL, "a", quiet())
	b := NewElector(c.Client(t), "/berth/", testTTL, "b", quiet())
	if _, err := a.Campaign(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	won := make(chan error, 1)
	go func() {
		term, err := b.Campaign(testCtx(t))
		if err == nil {
			defer term.Resign(context.Background())
		}
		won <- err
	}()
	waitCandidates(t, c, 2)
	if err := c.WipeMember(0); err != nil {
		t.Fatal(err)
	}
	if err := <-won; err != nil {
		t.Fatalf("the standby never led after etcd was wiped: %v", err)
	}
}

// waitCandidates waits until the election holds n candidates' keys.
func waitCandidates(t *testing.T, c *etcdtest.Cluster, n int) {
	t.Helper()
	cli := c.Client(t)
	for ctx := testCtx(t); ctx.Err() == nil; time.Sleep(20 * time.Millisecond) {
		resp, err := cli.Get(ctx, "/berth/election/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && resp.Count == int64(n) {
			return
		}
	}
	t.Fatalf("the election never held %d candidates", n)
}
