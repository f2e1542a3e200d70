package manager

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/internal/etcdtest"
)

// electionReads counts the reads of keys under an election prefix: the
// leadership checks.
type electionReads struct {
	clientv3.KV
	n atomic.Int64
}

func (r *electionReads) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if strings.Contains(key, "/election/") && len(opts) == 0 {
		r.n.Add(1)
	}
	return r.KV.Get(ctx, key, opts...)
}

// A leader confirms its term with etcd at most once per provider call: the
// fleet checks its own calls and the gate only the manager's, both through
// the store's proof, so no call pays two reads (before, the gate's read and
// the fleet's both ran for every fleet call). Counting, not timing: the
// bound holds however fast the machine is.
func TestOneLeadershipReadPerProviderCall(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	reads := &electionReads{}
	made := len(groupsMade())
	h := startHAManagerWith(t, etcd.Endpoints, "/one-read/", "", "counting-sim", func(m *Manager) {
		reads.KV = m.ha.cli.KV
		m.ha.cli.KV = reads
	})
	h.waitRole(t, "leader")
	time.Sleep(3 * time.Second) // listings every 200 ms, the idle instance made
	h.stop()
	groups := groupsMade()[made:]
	if len(groups) != 1 {
		t.Fatalf("%d providers made, want 1", len(groups))
	}
	calls, n := groups[0].calls.Load(), reads.n.Load()
	t.Logf("%d provider calls, %d reads of the election key", calls, n)
	if calls < 5 {
		t.Fatalf("only %d provider calls: the leader did not run its fleet", calls)
	}
	if n > calls {
		t.Errorf("%d reads of the election key for %d provider calls: some call was confirmed twice", n, calls)
	}
}
