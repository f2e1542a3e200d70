//go:build linux

package local_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
	"github.com/berth-ci/berth/providertest"
)

func TestMain(m *testing.M) {
	local.RunSandboxIfRequested()
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	providertest.RunWithOptions(t, func(t *testing.T) provider.InstanceGroup { return local.New() },
		provider.Settings{StateDir: dir}, providertest.Options{OnFailure: func(t *testing.T) { dumpLogs(t, dir) }})
}

func TestConformanceIsolatedNetwork(t *testing.T) {
	dir := t.TempDir()
	providertest.RunWithOptions(t, func(t *testing.T) provider.InstanceGroup { return local.New() },
		provider.Settings{StateDir: dir, Config: []byte(`{"network":"isolated"}`)},
		providertest.Options{OnFailure: func(t *testing.T) { dumpLogs(t, dir) }})
}

// dumpLogs logs the sandbox logs of the instances under dir.
func dumpLogs(t testing.TB, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "local", "instances", "*", "sandbox.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		t.Logf("%s:\n%s", l, b)
	}
}

// newGroup initialises a provider on dir and deletes, at the end of the
// test, every instance the directory holds.
func newGroup(t testing.TB, dir string, config string) *local.Provider {
	t.Helper()
	p := local.New()
	s := provider.Settings{StateDir: dir}
	if config != "" {
		s.Config = []byte(config)
	}
	if _, err := p.Init(context.Background(), s); err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, dir)
		}
		var ids []string
		p.Update(context.Background(), func(id string, _ provider.State) { ids = append(ids, id) })
		if _, err := p.Decrease(context.Background(), ids); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		p.Shutdown(context.Background()) // its sandbox spawner exits
	})
	return p
}

func states(t testing.TB, p provider.InstanceGroup) map[string]provider.State {
	t.Helper()
	m := map[string]provider.State{}
	if err := p.Update(context.Background(), func(id string, s provider.State) { m[id] = s }); err != nil {
		t.Fatal(err)
	}
	return m
}

func waitState(t testing.TB, p provider.InstanceGroup, id string, want provider.State) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got := states(t, p)[id]
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s is %q, want %q", id, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startOne creates one instance and waits until it runs.
func startOne(t testing.TB, p *local.Provider) string {
	t.Helper()
	before := states(t, p)
	if n, err := p.Increase(context.Background(), 1); err != nil || n != 1 {
		t.Fatalf("Increase: %d, %v", n, err)
	}
	var id string
	for got := range states(t, p) {
		if _, ok := before[got]; !ok {
			id = got
		}
	}
	if id == "" {
		t.Fatal("new instance not listed right after Increase")
	}
	waitState(t, p, id, provider.StateRunning)
	return id
}

func run(t testing.TB, p provider.InstanceGroup, id, cmd string) providertest.Result {
	t.Helper()
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := providertest.Exec(ctx, ci, cmd, nil)
	if err != nil {
		t.Fatalf("exec %q on %s: %v", cmd, id, err)
	}
	return res
}

type instanceMeta struct {
	PID        int    `json:"pid"`
	Cgroup     string `json:"cgroup"`
	PidsCgroup string `json:"pids_cgroup"`
}

func readMeta(t testing.TB, stateDir, id string) instanceMeta {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "local", "instances", id, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m instanceMeta
	if err := jsonUnmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSandboxLooksLikeAMachine(t *testing.T) {
	// A state dir outside /tmp (which the sandbox replaces anyway) checks
	// that the provider's state is hidden from jobs.
	dir, err := os.MkdirTemp("/var/tmp", "berth-local-test-")
	if err != nil {
		t.Logf("no /var/tmp (%v); using the test's temp dir", err)
		dir = t.TempDir()
	} else {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	p := newGroup(t, dir, "")
	id := startOne(t, p)
	host, _ := os.Hostname()
	checks := []struct{ cmd, want string }{
		{"hostname", id + "\n"},
		{"pwd; echo $HOME", "/berth\n/berth\n"},
		{"echo x > /berth/f && cat /berth/f", "x\n"},
		{"echo y > /tmp/f && cat /tmp/f", "y\n"},
		{"touch /usr/berth-should-fail 2>/dev/null || echo ro", "ro\n"},
		{"touch /berth-should-fail 2>/dev/null || echo ro", "ro\n"},
		{"echo $$; ls /proc | grep -c '^[0-9]' >/dev/null && echo ok", ""},
		{"tr '\\0' ' ' < /proc/1/cmdline | cut -d' ' -f1", "berth-sandbox\n"},
		{"test -e " + filepath.Join(dir, "local", "client_key") + " && echo visible || echo hidden", "hidden\n"},
		{"id -u", "0\n"},
	}
	for _, c := range checks {
		res := run(t, p, id, c.cmd)
		if c.want != "" && res.Stdout != c.want {
			t.Errorf("%q: got %q (stderr %q), want %q", c.cmd, res.Stdout, res.Stderr, c.want)
		}
	}
	// Root inside is never root on the host: unprivileged it is the
	// caller, as root a subordinate uid. A file the job creates shows
	// whose it is on the host.
	run(t, p, id, "touch /berth/owner")
	fi, err := os.Stat(filepath.Join(dir, "local", "instances", id, "disk", "owner"))
	if err != nil {
		t.Fatal(err)
	}
	owner := fi.Sys().(*syscall.Stat_t).Uid
	if owner == 0 || (os.Geteuid() != 0 && int(owner) != os.Geteuid()) {
		t.Errorf("a file made by root in the sandbox belongs to host uid %d, want %s", owner, map[bool]string{true: "a subordinate uid", false: "the caller's uid"}[os.Geteuid() == 0])
	}
	res := run(t, p, id, "cat /proc/self/uid_map")
	if f := strings.Fields(res.Stdout); len(f) != 3 || f[0] != "0" {
		t.Errorf("uid_map inside is %q, want root mapped", res.Stdout)
	}
	if host == id {
		t.Errorf("host and sandbox share hostname %q", host)
	}
	// The host's /tmp must not be the sandbox's.
	if _, err := os.Stat("/tmp/f"); err == nil {
		if b, _ := os.ReadFile("/tmp/f"); string(b) == "y\n" {
			t.Errorf("sandbox wrote to the host's /tmp")
		}
	}
	// Only the sandbox's own processes are visible.
	res = run(t, p, id, "ls /proc | grep -c '^[0-9]'")
	if n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout)); n == 0 || n > 10 {
		t.Errorf("sandbox sees %d processes, want a handful", n)
	}
}

// TestDisconnectKillsCommand checks that a client going away kills what its
// command started.
func TestDisconnectKillsCommand(t *testing.T) {
	p := newGroup(t, t.TempDir(), "")
	id := startOne(t, p)
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	client, err := providertest.Dial(context.Background(), ci)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Start("sleep 1000 & echo $!; wait"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, err := out.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(buf[:n]))
	if res := run(t, p, id, "kill -0 "+pid+" && echo alive"); res.Stdout != "alive\n" {
		t.Fatalf("sleep %s not running: %+v", pid, res)
	}
	client.Close()
	deadline := time.Now().Add(30 * time.Second)
	for run(t, p, id, "kill -0 "+pid+" 2>/dev/null && echo alive").Stdout == "alive\n" {
		if time.Now().After(deadline) {
			t.Fatalf("sleep %s still runs after the client disconnected", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOutlivesProvider checks that instances survive the provider object
// and that a new provider on the same directory adopts and deletes them.
func TestOutlivesProvider(t *testing.T) {
	dir := t.TempDir()
	p1 := local.New()
	if _, err := p1.Init(context.Background(), provider.Settings{StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	id := startOne(t, p1)
	run(t, p1, id, "echo hello > /berth/greeting")
	m := readMeta(t, dir, id)
	p1.Shutdown(context.Background())
	p1 = nil

	p2 := newGroup(t, dir, "")
	if got := states(t, p2)[id]; got != provider.StateRunning {
		t.Fatalf("new provider sees %s as %q, want running", id, got)
	}
	if res := run(t, p2, id, "cat /berth/greeting"); res.Stdout != "hello\n" {
		t.Errorf("file lost: %q", res.Stdout)
	}
	if err := p2.Heartbeat(context.Background(), id); err != nil {
		t.Errorf("Heartbeat: %v", err)
	}
	if acc, err := p2.Decrease(context.Background(), []string{id}); err != nil || len(acc) != 1 {
		t.Fatalf("Decrease: %v %v", acc, err)
	}
	if _, ok := states(t, p2)[id]; ok {
		t.Errorf("%s still listed after Decrease", id)
	}
	if _, err := os.Stat(filepath.Join(dir, "local", "instances", id)); !os.IsNotExist(err) {
		t.Errorf("instance dir left behind: %v", err)
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(m.PID) + "/cmdline"); err == nil && strings.HasPrefix(string(b), "berth-sandbox") {
		t.Errorf("sandbox process %d still runs", m.PID)
	}
	if m.Cgroup != "" {
		if _, err := os.Stat(m.Cgroup); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left behind", m.Cgroup)
		}
	}
	if acc, err := p2.Decrease(context.Background(), []string{id}); err != nil || len(acc) != 1 {
		t.Errorf("second Decrease must be accepted: %v %v", acc, err)
	}
}

// TestDeadSandboxReported checks that a sandbox that died is reported, not
// hidden, and can be deleted.
func TestDeadSandboxReported(t *testing.T) {
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	id := startOne(t, p)
	m := readMeta(t, dir, id)
	proc, err := os.FindProcess(m.PID)
	if err != nil {
		t.Fatal(err)
	}
	proc.Kill()
	waitState(t, p, id, provider.StateTimeout)
	if _, err := p.Decrease(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	if _, ok := states(t, p)[id]; ok {
		t.Errorf("%s still listed after Decrease", id)
	}
}

// TestSuspendSurvivesRestart suspends an instance, restarts the provider,
// and resumes it with its files.
func TestSuspendSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	p1 := newGroup(t, dir, "")
	id := startOne(t, p1)
	run(t, p1, id, "echo kept > /berth/f")
	if _, err := p1.Suspend(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	p2 := newGroup(t, dir, "")
	if got := states(t, p2)[id]; got != provider.StateSuspended {
		t.Fatalf("after restart %s is %q, want suspended", id, got)
	}
	if _, err := p2.Resume(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	waitState(t, p2, id, provider.StateRunning)
	if res := run(t, p2, id, "cat /berth/f"); res.Stdout != "kept\n" {
		t.Errorf("after resume: %q", res.Stdout)
	}
}

func TestBadConfig(t *testing.T) {
	for _, c := range []string{`{"network":"bridge"}`, `{"netwrok":"host"}`, `[1]`} {
		p := local.New()
		if _, err := p.Init(context.Background(), provider.Settings{StateDir: t.TempDir(), Config: []byte(c)}); err == nil {
			t.Errorf("Init accepted config %s", c)
		}
	}
	if _, err := local.New().Init(context.Background(), provider.Settings{}); err == nil {
		t.Error("Init accepted an empty state dir")
	}
}

func TestRegistered(t *testing.T) {
	g, err := provider.New("local")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.(provider.Suspender); !ok {
		t.Error("local provider does not implement provider.Suspender")
	}
}

// TestSuspendKeepsProcessesWithFreezer checks that, where instances get a
// cgroup, Suspend freezes them rather than stopping them, so a background
// process survives suspend and resume.
func TestSuspendKeepsProcessesWithFreezer(t *testing.T) {
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	id := startOne(t, p)
	m := readMeta(t, dir, id)
	if m.Cgroup == "" {
		t.Skip("no writable cgroup v2 here: Suspend stops the sandbox instead (covered by the other suspend tests)")
	}
	pid := strings.TrimSpace(run(t, p, id, "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $!").Stdout)
	if _, err := p.Suspend(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(m.Cgroup, "cgroup.events")); !strings.Contains(string(b), "frozen 1") {
		t.Errorf("cgroup not frozen after Suspend: %s", b)
	}
	if err := p.Heartbeat(context.Background(), id); err == nil {
		t.Error("Heartbeat succeeded on a suspended instance")
	}
	if _, err := p.Resume(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, id, provider.StateRunning)
	if res := run(t, p, id, "kill -0 "+pid+" && echo alive"); res.Stdout != "alive\n" {
		t.Errorf("background process %s lost across suspend/resume: %+v", pid, res)
	}
}

// TestIsolatedNetwork checks that network "isolated" leaves the sandbox
// only a loopback interface while SSH still works.
func TestIsolatedNetwork(t *testing.T) {
	p := newGroup(t, t.TempDir(), `{"network":"isolated"}`)
	id := startOne(t, p)
	res := run(t, p, id, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
	if res.Stdout != "lo\n" {
		t.Errorf("interfaces in an isolated sandbox: %q, want only lo", res.Stdout)
	}
}

// TestPidsLimit checks that pids_max contains a fork bomb: a job cannot
// have more processes than the limit, whichever cgroup version enforces it.
func TestPidsLimit(t *testing.T) {
	dir := t.TempDir()
	p := newGroup(t, dir, `{"pids_max": 64}`)
	id := startOne(t, p)
	if os.Geteuid() != 0 {
		// No cgroups: the sandbox sets RLIMIT_NPROC for its jobs.
		if res := run(t, p, id, "grep 'Max processes' /proc/self/limits | tr -s ' ' | cut -d' ' -f3"); res.Stdout != "64\n" {
			t.Errorf("unprivileged, a job's process limit is %q, want 64", res.Stdout)
		}
		res := run(t, p, id, "for i in $(seq 200); do sleep 2 & done; wait")
		if !strings.Contains(strings.ToLower(res.Stderr), "fork") {
			t.Errorf("200 sleeps against a limit of 64: no fork was refused: %+v", res)
		}
		return
	}
	m := readMeta(t, dir, id)
	limited := m.Cgroup
	if m.PidsCgroup != "" {
		limited = m.PidsCgroup
	}
	if _, err := os.Stat(filepath.Join(limited, "pids.max")); err != nil {
		t.Skip("no pids controller here (neither cgroup v2 nor v1)")
	}
	if b, _ := os.ReadFile(filepath.Join(limited, "pids.max")); strings.TrimSpace(string(b)) != "64" {
		t.Fatalf("pids.max of %s is %q, want 64", limited, b)
	}
	// A fork bomb of sorts: 200 sleeps. The kernel refuses forks past the
	// limit and counts them in pids.events.
	run(t, p, id, `for i in $(seq 200); do sleep 2 & done 2>/dev/null; wait 2>/dev/null; true`)
	b, err := os.ReadFile(filepath.Join(limited, "pids.events"))
	if err != nil {
		t.Fatal(err)
	}
	var refused int
	fmt.Sscanf(strings.TrimSpace(string(b)), "max %d", &refused)
	if refused == 0 {
		t.Errorf("200 processes under pids_max 64 and no fork was refused (pids.events %q)", b)
	}
	t.Logf("forks refused under pids_max 64: %d (%s)", refused, limited)
	if res := run(t, p, id, "echo alive"); res.Stdout != "alive\n" {
		t.Errorf("sandbox unusable after the limit was hit: %+v", res)
	}
}

// TestLimitsTheHostCannotEnforce checks that a limit the host's cgroups
// cannot enforce is refused at Init, naming the key.
func TestLimitsTheHostCannotEnforce(t *testing.T) {
	b, _ := os.ReadFile("/proc/self/cgroup")
	for _, key := range []string{"memory_max", "cpu_max"} {
		cfg := map[string]string{"memory_max": `{"memory_max": "1G"}`, "cpu_max": `{"cpu_max": "100000 100000"}`}[key]
		p := local.New()
		_, err := p.Init(context.Background(), provider.Settings{StateDir: t.TempDir(), Config: []byte(cfg)})
		if err == nil {
			// The host offers the controller: the limit must then be set.
			dir := t.TempDir()
			p := newGroup(t, dir, cfg)
			id := startOne(t, p)
			file := map[string]string{"memory_max": "memory.max", "cpu_max": "cpu.max"}[key]
			if got, err := os.ReadFile(filepath.Join(readMeta(t, dir, id).Cgroup, file)); err != nil || len(got) == 0 {
				t.Errorf("%s accepted but %s not set: %q %v", key, file, got, err)
			}
			continue
		}
		if !strings.Contains(err.Error(), key) {
			t.Errorf("%s refused without naming the key: %v (host cgroups: %s)", key, err, b)
		}
	}
}
