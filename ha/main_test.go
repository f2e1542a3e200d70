package ha

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/berth-ci/berth/internal/etcdtest"
)

// cluster is a three-member etcd cluster shared by the package's tests;
// each test works under its own prefix.
var cluster *etcdtest.Cluster

// testTTL is etcd's smallest lease TTL with its default election timeout
// (a shorter one is raised to it).
const testTTL = 2 * time.Second

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berth-ha-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cluster, err = etcdtest.New(dir, 3)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	cluster.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

var prefixes atomic.Int64

// newPrefix returns a key prefix no other test uses.
func newPrefix(t *testing.T) string {
	return fmt.Sprintf("/t%d-%s/", prefixes.Add(1), t.Name())
}

// client returns a new client of the shared cluster: each manager of a
// test has its own, as separate processes would.
func client(t *testing.T) *clientv3.Client { return benchClient(t) }

func benchClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: cluster.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// testCtx bounds a step that would otherwise hang the test run: it is a
// guard, not a timing assertion.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// manager is one berth manager of a test: its own client, elector and store.
type manager struct {
	cli   *clientv3.Client
	el    *Elector
	store *Store
	term  *Term
}

func newManager(t *testing.T, prefix, name string) *manager {
	t.Helper()
	cli := client(t)
	s, err := OpenStore(testCtx(t), cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return &manager{cli: cli, el: NewElector(cli, prefix, testTTL, name, quiet()), store: s}
}

// lead campaigns until m leads and fences its store with the term.
func (m *manager) lead(t *testing.T) {
	t.Helper()
	term, err := m.el.Campaign(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	m.term = term
	m.store.SetFence(term.Fence())
	t.Cleanup(func() { term.Resign(context.Background()) })
}
