package queue_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/berth-ci/berth/internal/etcdtest"
	"github.com/berth-ci/berth/jobsource/queue"
)

// The queue's behavioural tests run against both stores: forBackends runs
// a test once on queue.db and once on a real etcd (one embedded member,
// started at the first test that needs it and shared; each test works
// under its own prefix). openQueue opens the store the subtest's name says.

var (
	etcdOnce    sync.Once
	etcdCluster *etcdtest.Cluster
	etcdErr     error
	etcdDir     string
	prefixes    atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	if etcdCluster != nil {
		etcdCluster.Stop()
	}
	if etcdDir != "" {
		os.RemoveAll(etcdDir)
	}
	os.Exit(code)
}

// cluster returns the shared embedded etcd, starting it on first use.
func cluster(t testing.TB) *etcdtest.Cluster {
	t.Helper()
	etcdOnce.Do(func() {
		etcdDir, etcdErr = os.MkdirTemp("", "berth-queue-etcd")
		if etcdErr == nil {
			etcdCluster, etcdErr = etcdtest.New(etcdDir, 1)
		}
	})
	if etcdErr != nil {
		t.Fatal(etcdErr)
	}
	return etcdCluster
}

// etcdClient returns a new client of the shared etcd: each manager of a
// test has its own, as separate processes would.
func etcdClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster(t).Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// newPrefix returns a key prefix no other test uses.
func newPrefix(t testing.TB) string {
	return fmt.Sprintf("/q%d/", prefixes.Add(1))
}

// openEtcd opens a queue on prefix through its own client, closed when
// the test ends.
func openEtcd(t testing.TB, prefix string, fence queue.Fence, opts ...queue.Option) *queue.Queue {
	t.Helper()
	q, err := queue.OpenEtcd(context.Background(), etcdClient(t), prefix, fence,
		append([]queue.Option{queue.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatalf("OpenEtcd: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}

// forBackends runs test on queue.db ("bolt") and on etcd ("etcd").
func forBackends(t *testing.T, test func(t *testing.T)) {
	for _, name := range []string{"bolt", "etcd"} {
		t.Run(name, test)
	}
}

// onEtcd says whether t (a subtest of forBackends) is the etcd run.
func onEtcd(t testing.TB) bool {
	name := t.Name()
	return strings.HasSuffix(name, "/etcd") || strings.Contains(name, "/etcd/")
}

func openQueue(t *testing.T, dir string, opts ...queue.Option) *queue.Queue {
	t.Helper()
	if onEtcd(t) {
		return openEtcd(t, newPrefix(t), nil, opts...)
	}
	q, err := queue.Open(dir, append([]queue.Option{queue.WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { q.Close() })
	return q
}
