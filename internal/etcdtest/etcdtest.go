// Package etcdtest runs real etcd servers for tests: one member, or a
// three-member cluster whose members can be stopped one by one. They run
// inside the test process (go.etcd.io/etcd/server/v3/embed) unless
// BERTH_ETCD_BINARY names an etcd binary (Debian's /usr/bin/etcd, say):
// then each member is a process of that binary, so that the tests run
// against the etcd an operator installs.
package etcdtest

import (
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startTimeout bounds a cluster's start; members on a loaded CI machine
// with -race need a few seconds to elect their raft leader.
const startTimeout = 60 * time.Second

// Cluster is a running etcd cluster.
type Cluster struct {
	// members are the running servers, in start order; a stopped one is nil.
	members []member
	// Endpoints are the members' client URLs.
	Endpoints []string

	// closing tracks members still shutting down.
	closing sync.WaitGroup
	// cfgs start the members again (RestartMember).
	cfgs []*embed.Config
	// binary is BERTH_ETCD_BINARY: "" runs the members embedded.
	binary string
}

// Start runs a cluster of n members (1 or 3) with its data in t.TempDir
// and stops it when the test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	c, err := New(t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// New runs a cluster of n members with its data under dir, for a TestMain
// that shares one cluster between tests; the caller stops it.
func New(dir string, n int) (*Cluster, error) { return newWith(dir, n, 0) }

// StartWithQuota is Start with etcd's --quota-backend-bytes: writes past it
// meet etcd's NOSPACE alarm, as a full production cluster's do.
func StartWithQuota(t testing.TB, n int, quota int64) *Cluster {
	t.Helper()
	c, err := newWith(t.TempDir(), n, quota)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

func newWith(dir string, n int, quota int64) (*Cluster, error) {
	var last error
	for range 3 { // a free port may be taken between finding and binding it
		c, err := start(dir, n, quota)
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, fmt.Errorf("start an etcd cluster of %d: %w", n, last)
}

func start(parent string, n int, quota int64) (*Cluster, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var initial []string
	cfgs := make([]*embed.Config, n)
	dir, err := os.MkdirTemp(parent, "etcd")
	if err != nil {
		return nil, err
	}
	for i := range n {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("m%d", i)
		cfg.Dir = fmt.Sprintf("%s/%s", dir, cfg.Name)
		peer := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i])}
		client := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.ListenMetricsUrls = nil
		cfg.InitialClusterToken = fmt.Sprintf("berth-test-%d", ports[0])
		cfg.UnsafeNoFsync = true // the data dir is thrown away
		cfg.QuotaBackendBytes = quota
		// The cheapest password hash: the default cost takes seconds per
		// login under -race on a loaded machine, past a client's dial timeout.
		cfg.BcryptCost = 4
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		initial = append(initial, cfg.Name+"="+peer.String())
		cfgs[i] = cfg
	}
	c := &Cluster{cfgs: cfgs, binary: os.Getenv(BinaryEnv)}
	for _, cfg := range cfgs {
		cfg.InitialCluster = strings.Join(initial, ",")
		m, err := c.startMember(cfg)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.members = append(c.members, m)
		c.Endpoints = append(c.Endpoints, cfg.AdvertiseClientUrls[0].String())
	}
	// Members of a cluster are ready together, once they elected a leader.
	deadline := time.After(startTimeout)
	for _, m := range c.members {
		if err := m.ready(deadline); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) startMember(cfg *embed.Config) (member, error) {
	if c.binary != "" {
		return startProcess(c.binary, cfg)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	return embedded{e}, nil
}

// Client returns a client of every member, closed when the test ends.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// StopMember stops member i (idempotent): it refuses new requests at
// once. Its shutdown finishes in the background, because etcd waits up to
// its request timeout (7 s) for clients' open streams; Stop waits for it.
func (c *Cluster) StopMember(i int) {
	if m := c.members[i]; m != nil {
		c.members[i] = nil
		c.closing.Go(m.Close)
	}
}

// RestartMember starts the stopped member i again on its data and ports,
// once every stopping member finished, and waits until it is ready: etcd
// coming back after an outage.
func (c *Cluster) RestartMember(i int) error {
	if c.members[i] != nil {
		return fmt.Errorf("etcd member %d is running", i)
	}
	c.closing.Wait()
	m, err := c.startMember(c.cfgs[i])
	if err != nil {
		return fmt.Errorf("restart etcd member %d: %w", i, err)
	}
	if err := m.ready(time.After(startTimeout)); err != nil {
		m.Close()
		return fmt.Errorf("restart etcd member %d: %w", i, err)
	}
	c.members[i] = m
	return nil
}

// Stop stops every member and waits until all have stopped.
func (c *Cluster) Stop() {
	for i := range c.members {
		c.StopMember(i)
	}
	c.closing.Wait()
}

// freePorts finds n ports free now on 127.0.0.1; embed binds by number,
// not from 127.0.0.1:0.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// WipeMember stops member i, deletes its data and starts it again on the
// same ports: an etcd restarted empty (a lost volume, a restore gone
// wrong). With one member that is a new, empty cluster.
func (c *Cluster) WipeMember(i int) error {
	c.StopMember(i)
	c.closing.Wait()
	if err := os.RemoveAll(c.cfgs[i].Dir); err != nil {
		return fmt.Errorf("wipe etcd member %d: %w", i, err)
	}
	return c.RestartMember(i)
}

// CopyMember stops member i, copies its data directory and starts it
// again: an operator's backup (as good as `etcdctl snapshot save`, which
// copies the same database). It returns the copy, for RollBackMember.
func (c *Cluster) CopyMember(i int) (string, error) {
	c.StopMember(i)
	c.closing.Wait()
	dst := fmt.Sprintf("%s.copy-%d", c.cfgs[i].Dir, time.Now().UnixNano())
	if err := copyDir(dst, c.cfgs[i].Dir); err != nil {
		return "", fmt.Errorf("copy etcd member %d: %w", i, err)
	}
	return dst, c.RestartMember(i)
}

// RollBackMember stops member i, replaces its data with a copy
// CopyMember made and starts it again: etcd restored from a snapshot, the
// recovery docs/ha.md names. With one member the cluster is back in the
// past, with the identity it had then.
func (c *Cluster) RollBackMember(i int, copied string) error {
	c.StopMember(i)
	c.closing.Wait()
	if err := os.RemoveAll(c.cfgs[i].Dir); err != nil {
		return fmt.Errorf("roll back etcd member %d: %w", i, err)
	}
	if err := copyDir(c.cfgs[i].Dir, copied); err != nil {
		return fmt.Errorf("roll back etcd member %d: %w", i, err)
	}
	return c.RestartMember(i)
}

// copyDir copies the tree src to dst, which must not exist, with the
// owner-only permissions etcd wants on its data directory.
func copyDir(dst, src string) error {
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return err
	}
	return filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return os.Chmod(p, 0o700)
	})
}

// SignalMember sends sig to member i when it runs as a process of
// BERTH_ETCD_BINARY: SIGSTOP freezes it as a hung etcd is (connections
// open, no answer), SIGCONT thaws it. An embedded member cannot be
// frozen; the error says so, for the test to skip.
func (c *Cluster) SignalMember(i int, sig os.Signal) error {
	p, ok := c.members[i].(*process)
	if !ok {
		return fmt.Errorf("etcd member %d runs embedded and cannot be signalled: set %s to an etcd binary", i, BinaryEnv)
	}
	return p.cmd.Process.Signal(sig)
}
