package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/internal/etcdtest"
	"github.com/berth-ci/berth/provider"
)

// countingGroup is the sim provider counting every call berth makes to it,
// optional ones included.
type countingGroup struct {
	provider.InstanceGroup
	calls atomic.Int64
}

func (c *countingGroup) Init(ctx context.Context, s provider.Settings) (provider.Info, error) {
	c.calls.Add(1)
	return c.InstanceGroup.Init(ctx, s)
}

func (c *countingGroup) Update(ctx context.Context, fn func(string, provider.State)) error {
	c.calls.Add(1)
	return c.InstanceGroup.Update(ctx, fn)
}

func (c *countingGroup) Increase(ctx context.Context, n int) (int, error) {
	c.calls.Add(1)
	return c.InstanceGroup.Increase(ctx, n)
}

func (c *countingGroup) Decrease(ctx context.Context, ids []string) ([]string, error) {
	c.calls.Add(1)
	return c.InstanceGroup.Decrease(ctx, ids)
}

func (c *countingGroup) ConnectInfo(ctx context.Context, id string) (provider.ConnectInfo, error) {
	c.calls.Add(1)
	return c.InstanceGroup.ConnectInfo(ctx, id)
}

func (c *countingGroup) Heartbeat(ctx context.Context, id string) error {
	c.calls.Add(1)
	return c.InstanceGroup.Heartbeat(ctx, id)
}

// countingGroups are the groups made so far, in order: one per manager
// that took charge of the fleet.
var countingGroups struct {
	sync.Mutex
	list []*countingGroup
}

func init() {
	provider.Register("counting-sim", func() provider.InstanceGroup {
		sim, _ := provider.New("sim")
		g := &countingGroup{InstanceGroup: sim}
		countingGroups.Lock()
		countingGroups.list = append(countingGroups.list, g)
		countingGroups.Unlock()
		return g
	})
}

func groupsMade() []*countingGroup {
	countingGroups.Lock()
	defer countingGroups.Unlock()
	return append([]*countingGroup(nil), countingGroups.list...)
}

// haManager is one in-process manager of a shared fleet.
type haManager struct {
	m      *Manager
	addr   string
	token  string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// startHAManager runs a manager with [ha] on etcd at endpoints; token is
// the shared API token ("" to let it make one).
func startHAManager(t *testing.T, endpoints []string, prefix, token string) *haManager {
	t.Helper()
	return startHAManagerWith(t, endpoints, prefix, token, "counting-sim", nil)
}

// startHAManagerWith is startHAManager with the provider named, and
// before, if set, called between New and Run.
func startHAManagerWith(t *testing.T, endpoints []string, prefix, token, prov string, before func(*Manager)) *haManager {
	t.Helper()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if token != "" {
		os.MkdirAll(state, 0o700)
		if err := os.WriteFile(api.TokenPath(state), []byte(token+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	eps, _ := json.Marshal(endpoints)
	toml := fmt.Sprintf("listen = %q\nstate_dir = %q\n[autoscaler]\nprovider = %q\nmax_instances = 3\n[autoscaler.policy]\nidle_count = 1\n[ha]\netcd_endpoints = %s\nlease_ttl = \"2s\"\nkey_prefix = %q\n",
		addr, state, prov, eps, prefix)
	cfg, err := config.Parse([]byte(toml), filepath.Join(dir, "berth.toml"))
	if err != nil {
		t.Fatal(err)
	}
	var w io.Writer = io.Discard
	if testing.Verbose() {
		w = os.Stderr
	}
	ctx, cancel := context.WithCancel(context.Background())
	m, err := New(ctx, cfg, slog.New(slog.NewTextHandler(w, nil)).With("manager", addr), Options{UpdateInterval: 200 * time.Millisecond, ShutdownGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(m)
	}
	tok, _ := os.ReadFile(api.TokenPath(state))
	h := &haManager{m: m, addr: addr, token: string(tok[:len(tok)-1]), cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- m.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

// stop stops the manager and waits for Run; it may be called again.
func (h *haManager) stop() {
	h.once.Do(func() {
		h.cancel()
		<-h.done
	})
}

// health asks the manager's /healthz.
func (h *haManager) health(t *testing.T) health {
	t.Helper()
	resp, err := http.Get("http://" + h.addr + "/healthz")
	if err != nil {
		return health{}
	}
	defer resp.Body.Close()
	var hh health
	json.NewDecoder(resp.Body).Decode(&hh)
	return hh
}

func (h *haManager) waitRole(t *testing.T, role string) health {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		// A standby names its leader once the background check of the
		// store has answered (/healthz never asks etcd itself).
		if hh := h.health(t); hh.Role == role && (role != "standby" || hh.Leader != "") {
			return hh
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("manager %s: never became %s (healthz %+v)", h.addr, role, h.health(t))
	return health{}
}

// The manager that does not lead makes no provider call at all (it has
// not even made its provider), and forwards the API to the leader; when
// the leader stops, it takes over; a leader whose lease is revoked stops
// calling its provider at once.
func TestStandbyMakesNoProviderCall(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	before := len(groupsMade())
	a := startHAManager(t, etcd.Endpoints, "/standby-test/", "")
	a.waitRole(t, "leader")
	b := startHAManager(t, etcd.Endpoints, "/standby-test/", a.token)
	hb := b.waitRole(t, "standby")
	if hb.Leader != "http://"+a.addr {
		t.Errorf("standby's /healthz names leader %q, want %q", hb.Leader, "http://"+a.addr)
	}
	time.Sleep(time.Second) // five listing intervals of the leader
	made := groupsMade()[before:]
	if len(made) != 1 || made[0].calls.Load() == 0 {
		t.Fatalf("providers made: %d (want 1, the leader's, which calls it)", len(made))
	}
	// The standby answers the API through the leader.
	c := api.NewClient("http://" + b.addr)
	c.Token = a.token
	if _, err := c.Instances(context.Background()); err != nil {
		t.Fatalf("GET /api/v1/instances on the standby: %v", err)
	}
	// And the console: its sign-in page comes from the leader.
	resp, err := http.Get("http://" + b.addr + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /ui/login on the standby: %s", resp.Status)
	}
	// /metrics describes the manager asked.
	if m := metricsText(t, b.addr); !strings.Contains(m, "berth_leader 0") || !strings.Contains(m, "berth_leadership_changes_total 0") {
		t.Errorf("the standby's /metrics does not say it stands by and never led")
	}
	if m := metricsText(t, a.addr); !strings.Contains(m, "berth_leader 1") || !strings.Contains(m, "berth_leadership_changes_total 1") {
		t.Errorf("the leader's /metrics does not say it leads, after one term")
	}

	// The leader's lease is revoked (as etcd does when it expires): it
	// stops calling its provider, and the standby takes over.
	revokeLeader(t, etcd.Client(t), "/standby-test/")
	a.waitRole(t, "standby")
	calls := made[0].calls.Load()
	b.waitRole(t, "leader")
	time.Sleep(time.Second)
	if n := made[0].calls.Load(); n != calls {
		t.Errorf("the old leader called its provider %d times after it stepped down", n-calls)
	}
	if made := groupsMade()[before:]; len(made) != 2 || made[1].calls.Load() == 0 {
		t.Errorf("the new leader made no provider or never called it (%d providers)", len(made))
	}
}

func metricsText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// revokeLeader revokes the lease of the leading manager's election key.
func revokeLeader(t *testing.T, cli *clientv3.Client, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix+"election/", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("find the leader's key: %v (%d keys)", err, len(resp.Kvs))
	}
	if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
}

// etcd unreachable at start: New retries, one log line per attempt, while
// /healthz answers 503 saying that etcd cannot be reached; it gives up
// only when told to stop.
func TestEtcdUnreachableAtStartIsRetried(t *testing.T) {
	free := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		return ln.Addr().String()
	}
	addr, etcdAddr := free(), free() // nothing listens on etcdAddr
	dir := t.TempDir()
	toml := fmt.Sprintf("listen = %q\nstate_dir = %q\n[autoscaler]\nprovider = \"counting-sim\"\n[ha]\netcd_endpoints = [\"http://%s\"]\nlease_ttl = \"2s\"\n",
		addr, filepath.Join(dir, "state"), etcdAddr)
	cfg, err := config.Parse([]byte(toml), filepath.Join(dir, "berth.toml"))
	if err != nil {
		t.Fatal(err)
	}
	var logged syncLog
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := New(ctx, cfg, slog.New(slog.NewTextHandler(&logged, nil)), Options{StartRetryMax: 300 * time.Millisecond})
		done <- err
	}()
	var why string
	deadline := time.Now().Add(30 * time.Second)
	for why == "" && time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
			var h health
			json.NewDecoder(resp.Body).Decode(&h)
			resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable && len(h.Problems) == 1 && !strings.Contains(h.Problems[0], "first attempt under way") {
				why = h.Problems[0]
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(why, "etcd at [http://"+etcdAddr+"] cannot be reached") {
		t.Errorf("/healthz while etcd is down said %q", why)
	}
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "stopped while waiting for etcd") {
		t.Errorf("New after the stop: %v", err)
	}
	if n := strings.Count(logged.String(), "etcd not ready; retrying"); n < 1 {
		t.Errorf("%d log lines about the retries", n)
	}
}

// syncLog is a log sink safe for concurrent writes.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Host keys a plugin could not report live in etcd, so the next leader
// trusts what the first one saw.
func TestHostKeysLiveInEtcd(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	a := etcdHostKeys{cli: etcd.Client(t), prefix: "/hk/"}
	b := etcdHostKeys{cli: etcd.Client(t), prefix: "/hk/"} // another manager
	if k, err := b.HostKey("g", "i-1"); err != nil || k != "" {
		t.Fatalf("unknown key: %q, %v", k, err)
	}
	if err := a.PutHostKey("g", "i-1", "ssh-ed25519 AAAA"); err != nil {
		t.Fatal(err)
	}
	if k, err := b.HostKey("g", "i-1"); err != nil || k != "ssh-ed25519 AAAA" {
		t.Fatalf("the other manager reads %q, %v", k, err)
	}
	if err := b.ForgetHostKey("g", "i-1"); err != nil {
		t.Fatal(err)
	}
	if k, _ := a.HostKey("g", "i-1"); k != "" {
		t.Fatalf("forgotten key still read: %q", k)
	}
}
