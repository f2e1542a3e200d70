package plugin

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/internal/sandboxtest"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/sdk"
	"github.com/berth-ci/berth/store"
)

var simPlugin, brokenPlugin, localPlugin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "berth-plugin-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	simPlugin = filepath.Join(dir, "berth-provider-sim")
	brokenPlugin = filepath.Join(dir, "berth-provider-broken")
	localPlugin = filepath.Join(dir, "berth-provider-local")
	for bin, pkg := range map[string]string{simPlugin: "../../cmd/berth-provider-sim", brokenPlugin: "../../internal/testdata/brokenplugin", localPlugin: "../../cmd/berth-provider-local"} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build test plugin:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// logBuffer is a slog destination tests can read while plugins write.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// open starts a plugin with the given provider_config and fast restarts.
func open(t *testing.T, path, name, config string, tweak func(*Options)) (*Group, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	opts := Options{Name: name, Path: path, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		CallTimeout: 10 * time.Second, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	if tweak != nil {
		tweak(&opts)
	}
	g := New(opts)
	stateDir := t.TempDir()
	if _, err := g.Init(context.Background(), provider.Settings{Config: []byte(config), StateDir: stateDir}); err != nil {
		t.Fatalf("Init: %v\nlog:\n%s", err, logs)
	}
	t.Cleanup(func() {
		// Instances outlive their provider by design: delete what the test
		// created, and kill what a broken plugin could not delete, so that
		// no sandbox outlives the test.
		var ids []string
		if g.Update(context.Background(), func(id string, _ provider.State) { ids = append(ids, id) }) == nil && len(ids) > 0 {
			g.Decrease(context.Background(), ids)
		}
		g.Shutdown(context.Background())
		for pid := range sandboxtest.Processes(stateDir) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if t.Failed() {
			t.Logf("log:\n%s", logs)
		}
	})
	return g, logs
}

func listing(t *testing.T, g *Group) map[string]provider.State {
	t.Helper()
	got := map[string]provider.State{}
	if err := g.Update(context.Background(), func(id string, s provider.State) { got[id] = s }); err != nil {
		t.Fatalf("Update: %v", err)
	}
	return got
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPluginServesTheInstanceGroup(t *testing.T) {
	g, _ := open(t, simPlugin, "sim", `{"supports_suspend": true}`, nil)
	if info := g.Info(); info.ID == "" || !info.Capabilities.Suspend {
		t.Fatalf("Info = %+v; want an ID and the suspend capability from provider_config", info)
	}
	ctx := context.Background()
	if n, err := g.Increase(ctx, 2); n != 2 || err != nil {
		t.Fatalf("Increase(2) = %d, %v", n, err)
	}
	var ids []string
	waitFor(t, "2 running instances", func() bool {
		ids = ids[:0]
		for id, s := range listing(t, g) {
			if s == provider.StateRunning {
				ids = append(ids, id)
			}
		}
		return len(ids) == 2
	})
	ci, err := g.ConnectInfo(ctx, ids[0])
	if err == nil || !strings.Contains(err.Error(), "host key") {
		// sim reports no host key and the group has no store: refused, never unchecked.
		t.Errorf("ConnectInfo of an instance without a host key and no store: %+v, %v; want a refusal naming the host key", ci, err)
	}
	if err := g.Heartbeat(ctx, ids[0]); err != nil {
		t.Errorf("Heartbeat: %v", err)
	}
	if err := g.Heartbeat(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Heartbeat(nope) = %v; want the plugin's error naming the instance", err)
	}
	if acc, err := g.Suspend(ctx, ids[:1]); err != nil || len(acc) != 1 {
		t.Errorf("Suspend = %v, %v", acc, err)
	}
	if acc, err := g.Decrease(ctx, ids); err != nil || len(acc) != 2 {
		t.Errorf("Decrease = %v, %v", acc, err)
	}
	if h := g.Health(); h.Status != "ok" || h.PID == 0 || h.Protocol != sdk.ProtocolVersion || h.Restarts != 0 {
		t.Errorf("Health = %+v", h)
	}
}

func TestKilledPluginIsRestartedAndReinitialised(t *testing.T) {
	var restarted atomic.Int32
	g, logs := open(t, simPlugin, "sim", "", func(o *Options) { o.OnRestart = func() { restarted.Add(1) } })
	pid := g.Health().PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// A call made while the plugin is down waits for the restart.
	if err := g.Update(context.Background(), func(string, provider.State) {}); err != nil {
		t.Fatalf("Update after kill -9: %v; want the call to reach the restarted plugin", err)
	}
	h := g.Health()
	if h.Restarts != 1 || h.Status != "ok" || h.PID == pid || h.LastError == "" {
		t.Errorf("Health after kill -9 = %+v; want one restart, a new pid and the reason", h)
	}
	waitFor(t, "OnRestart", func() bool { return restarted.Load() == 1 })
	if !strings.Contains(logs.String(), "plugin=sim") || !strings.Contains(logs.String(), "provider plugin restarted") {
		t.Errorf("log does not tell of the restart with the plugin's name:\n%s", logs)
	}
}

func TestCrashInACallFailsThatCallOnly(t *testing.T) {
	g, _ := open(t, brokenPlugin, "broken", `{"broken": "crash-update"}`, nil)
	err := g.Update(context.Background(), func(string, provider.State) { t.Error("fn called for a crashed listing") })
	if err == nil {
		t.Fatal("Update of a plugin that exits mid-call succeeded")
	}
	waitFor(t, "restart", func() bool { return g.Health().Restarts >= 1 })
}

func TestGarbageListingIsRefusedWhole(t *testing.T) {
	g, logs := open(t, brokenPlugin, "broken", `{"broken": "bad-state"}`, nil)
	// The plugin's stderr is forwarded asynchronously, so wait for it.
	want := `level=INFO msg="broken plugin initialised" plugin=broken base="" mode=bad-state`
	waitFor(t, "the plugin's own log line in berth's log as "+want, func() bool { return strings.Contains(logs.String(), want) })
	g.Increase(context.Background(), 1)
	called := 0
	err := g.Update(context.Background(), func(string, provider.State) { called++ })
	if err == nil || !strings.Contains(err.Error(), `invalid state "exploded"`) || called != 0 {
		t.Fatalf("Update with a bogus state: err %v, fn called %d times; want an error naming the state and no listing", err, called)
	}
	if h := g.Health(); h.Status != "ok" || h.Restarts != 0 {
		t.Errorf("a garbage answer restarted the plugin: %+v", h)
	}
}

func TestHungPluginIsRestarted(t *testing.T) {
	g, _ := open(t, brokenPlugin, "broken", `{"broken": "hang-update"}`, func(o *Options) {
		o.CallTimeout = 300 * time.Millisecond
	})
	for i := range 2 {
		err := g.Update(context.Background(), func(string, provider.State) {})
		if err == nil || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("Update %d of a hung plugin = %v; want a timeout", i, err)
		}
	}
	waitFor(t, "restart of the hung plugin", func() bool { h := g.Health(); return h.Restarts >= 1 && h.Status == "ok" })
	if h := g.Health(); !strings.Contains(h.LastError, "timed out") {
		t.Errorf("LastError = %q; want the timeouts", h.LastError)
	}
	// Other calls of the restarted plugin work.
	if n, err := g.Increase(context.Background(), 1); n != 1 || err != nil {
		t.Errorf("Increase after restart = %d, %v", n, err)
	}
}

func TestUnstartablePluginFailsInit(t *testing.T) {
	g := New(Options{Name: "nope", Path: "/bin/true"})
	_, err := g.Init(context.Background(), provider.Settings{})
	if err == nil || !strings.Contains(err.Error(), "/bin/true") {
		t.Fatalf("Init of a binary that is no plugin = %v; want an error naming it", err)
	}
}

func TestProtocolVersionIsNegotiated(t *testing.T) {
	c := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: map[int]goplugin.PluginSet{sdk.ProtocolVersion + 1: {sdk.PluginName: &sdk.GRPCPlugin{}}},
		Cmd:              exec.Command(simPlugin),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Level: hclog.Off}),
	})
	defer c.Kill()
	_, err := c.Client()
	if err == nil || !strings.Contains(err.Error(), "ncompatible") {
		t.Fatalf("a host speaking only protocol %d started a plugin of protocol %d: %v", sdk.ProtocolVersion+1, sdk.ProtocolVersion, err)
	}
}

func TestPluginLogLinesCarryItsName(t *testing.T) {
	var out bytes.Buffer
	w := &logWriter{log: slog.New(slog.NewTextHandler(&out, nil)).With("plugin", "aws")}
	fmt.Fprint(w, `{"@level":"warn","@message":"quota low","@timestamp":"2026-01-01T00:00:00.000000Z","left":3}`+"\n")
	fmt.Fprint(w, `{"@message": 5, "@level": []}`+"\nplain line\npart")
	fmt.Fprint(w, "ial\n")
	got := out.String()
	for _, want := range []string{
		`level=WARN msg="quota low" plugin=aws left=3`,
		`level=INFO msg="{\"@message\": 5, \"@level\": []}" plugin=aws`,
		`msg="plain line" plugin=aws`,
		`msg=partial plugin=aws`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
}

// sshServer answers SSH handshakes with the host key in key until the test ends.
func sshServer(t *testing.T, key *atomic.Pointer[ssh.Signer]) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			cfg := &ssh.ServerConfig{NoClientAuth: true}
			cfg.AddHostKey(*key.Load())
			go func() { defer c.Close(); ssh.NewServerConn(c, cfg) }()
		}
	}()
	return ln.Addr().String()
}

func newSigner(t *testing.T) ssh.Signer {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestHostKeyIsTrustedOnFirstUseAndRecorded(t *testing.T) {
	first, second := newSigner(t), newSigner(t)
	var key atomic.Pointer[ssh.Signer]
	key.Store(&first)
	addr := sshServer(t, &key)
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, logs := open(t, brokenPlugin, "fleeting-like", fmt.Sprintf(`{"broken": "no-host-key", "ssh_addr": %q}`, addr),
		func(o *Options) { o.HostKeys = st })
	ctx := context.Background()
	g.Increase(ctx, 1)
	var id string
	waitFor(t, "an instance", func() bool {
		for i, s := range listing(t, g) {
			id = i
			return s == provider.StateRunning
		}
		return false
	})
	ci, err := g.ConnectInfo(ctx, id)
	want := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(first.PublicKey())))
	if err != nil || ci.HostKey != want {
		t.Fatalf("ConnectInfo = %q, %v; want the key the server presented first, %q", ci.HostKey, err, want)
	}
	if rec, _ := st.HostKey(g.Info().ID, id); rec != want {
		t.Errorf("store records %q, want %q", rec, want)
	}
	if !strings.Contains(logs.String(), "trusting the instance's SSH host key on first use") {
		t.Errorf("no log line about trust on first use:\n%s", logs)
	}
	// The server now presents another key: berth keeps the recorded one, so
	// the executor refuses the impostor rather than trusting it anew.
	key.Store(&second)
	if got, _ := scanHostKey(ctx, addr); got == want {
		t.Fatal("test server did not change its key")
	}
	ci, err = g.ConnectInfo(ctx, id)
	if err != nil || ci.HostKey != want {
		t.Errorf("ConnectInfo after the key changed = %q, %v; want the recorded key %q", ci.HostKey, err, want)
	}
	if _, err := g.Decrease(ctx, []string{id}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := st.HostKey(g.Info().ID, id); rec != "" {
		t.Errorf("the host key of a deleted instance is still recorded: %q", rec)
	}
}

func TestPluginThatCannotRestartIsRetriedUntilItCan(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "berth-provider-sim")
	good, err := os.ReadFile(simPlugin)
	if err != nil {
		t.Fatal(err)
	}
	install := func(b []byte) {
		t.Helper()
		tmp := path + ".new"
		if err := os.WriteFile(tmp, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	install(good)
	g, logs := open(t, path, "sim", "", func(o *Options) { o.CallTimeout = 500 * time.Millisecond })
	install([]byte("#!/bin/sh\necho 'not a plugin any more' >&2\nexit 1\n"))
	syscall.Kill(g.Health().PID, syscall.SIGKILL)
	waitFor(t, "failed restart attempts", func() bool { return strings.Count(logs.String(), "provider plugin restart failed") >= 2 })
	if h := g.Health(); h.Status != "restarting" || h.PID != 0 || h.Restarts != 0 {
		t.Errorf("Health while the plugin cannot start = %+v; want restarting, no pid, no restart yet", h)
	}
	err = g.Heartbeat(context.Background(), "x")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "restarting") {
		t.Errorf("a call while the plugin cannot start = %v; want ErrUnavailable saying it is restarting", err)
	}
	if !strings.Contains(logs.String(), "not a plugin any more") {
		t.Errorf("the failed binary's stderr is not in the log:\n%s", logs)
	}
	install(good)
	waitFor(t, "the restart to succeed", func() bool { h := g.Health(); return h.Status == "ok" && h.Restarts == 1 })
	if n, err := g.Increase(context.Background(), 1); n != 1 || err != nil {
		t.Errorf("Increase after the plugin came back = %d, %v", n, err)
	}
}

func TestPluginRunByHandExplainsItself(t *testing.T) {
	out, err := exec.Command(simPlugin).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "This binary is a plugin") {
		t.Errorf("plugin run without berth's handshake cookie: %v\n%s", err, out)
	}
}

func TestFrozenPluginIsRestartedAfterOneTimeout(t *testing.T) {
	g, _ := open(t, simPlugin, "sim", "", func(o *Options) { o.CallTimeout = 300 * time.Millisecond })
	pid := g.Health().PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	// SIGSTOP takes effect asynchronously: wait until the kernel shows the
	// process stopped, else the call may still be answered.
	waitFor(t, "the plugin process to stop", func() bool {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		return len(f) > 0 && f[0] == "T"
	})
	if err := g.Heartbeat(context.Background(), "x"); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("Heartbeat on a stopped plugin = %v; want a timeout", err)
	}
	waitFor(t, "the frozen plugin to be replaced", func() bool { h := g.Health(); return h.Restarts == 1 && h.Status == "ok" })
	if h := g.Health(); h.PID == pid || !strings.Contains(h.LastError, "health check") {
		t.Errorf("Health = %+v; want a new process and the failed health check as the reason", h)
	}
}
