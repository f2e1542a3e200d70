package main

// End-to-end harness: the tests in this package build the real berth binary,
// run the daemon as a child process on the local provider (real sandboxes,
// real SSH, a real bbolt file) and drive it through the CLI, as a user would.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/sandboxtest"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
)

var (
	berthBin     string
	healthClient = &http.Client{Timeout: 2 * time.Second}
)

func TestMain(m *testing.M) {
	local.RunSandboxIfRequested()
	dir, err := os.MkdirTemp("", "berth-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755) // the unprivileged test runs it as nobody
	berthBin = filepath.Join(dir, "berth")
	// berth-sandbox beside berth, as releases ship them: the daemons under
	// test start their sandboxes from it, as a user's would.
	build := exec.Command("go", "build", "-o", dir+"/", ".", "../berth-sandbox")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build berth and berth-sandbox for the end-to-end tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer collects a child's output safely while it runs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// daemon is one `berth run` child process.
type daemon struct {
	t      *testing.T
	dir    string // holds berth.toml and state/
	listen string
	cmd    *exec.Cmd
	log    *syncBuffer
	done   chan struct{}
	// prefix runs berth through another command, such as setpriv.
	prefix []string
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// newDaemon writes berth.toml with the given extra TOML and starts berth.
// It registers a cleanup that stops berth and deletes every sandbox.
func newDaemon(t *testing.T, toml string, prefix ...string) *daemon {
	t.Helper()
	d := newDaemonUnstarted(t, toml, prefix...)
	d.start()
	return d
}

// newDaemonUnstarted is newDaemon without the start: the test starts
// berth itself (d.spawn to watch it start).
func newDaemonUnstarted(t *testing.T, toml string, prefix ...string) *daemon {
	t.Helper()
	dir := t.TempDir()
	if len(prefix) > 0 {
		// An unprivileged berth needs a state directory it can write.
		var err error
		if dir, err = os.MkdirTemp("", "berth-e2e-unpriv"); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777)
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	d := &daemon{t: t, dir: dir, listen: freeAddr(t), prefix: prefix}
	cfg := fmt.Sprintf("listen = %q\nstate_dir = %q\n%s\n", d.listen, filepath.Join(dir, "state"), toml)
	if err := os.WriteFile(filepath.Join(dir, "berth.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.stop()
		removeSandboxes(t, filepath.Join(dir, "state", "provider", "local"))
		if t.Failed() {
			t.Logf("berth log:\n%s", d.log)
		}
	})
	return d
}

func (d *daemon) start() {
	d.t.Helper()
	d.spawn()
	d.waitHealthy()
}

// spawn starts `berth run` without waiting for it to be ready.
func (d *daemon) spawn() {
	d.t.Helper()
	d.log = &syncBuffer{}
	args := append(append([]string{}, d.prefix...), berthBin, "run", "--config", filepath.Join(d.dir, "berth.toml"))
	d.cmd = exec.Command(args[0], args[1:]...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.done = make(chan struct{})
	go func() { d.cmd.Wait(); close(d.done) }()
}

// waitHealthy waits for /healthz to answer 200.
func (d *daemon) waitHealthy() {
	d.t.Helper()
	waitFor(d.t, 30*time.Second, "berth to serve /healthz", func() bool {
		select {
		case <-d.done:
			d.t.Fatalf("berth exited at start:\n%s", d.log)
		default:
		}
		// Ask /healthz rather than only dialing: the answer must be berth's.
		resp, err := healthClient.Get("http://" + d.listen + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

// kill9 kills berth the hard way; its sandboxes live on.
func (d *daemon) kill9() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
}

// stop asks berth to stop gracefully and waits.
func (d *daemon) stop() {
	if d.cmd == nil {
		return
	}
	select {
	case <-d.done:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
	}
}

// berth runs the CLI against this daemon and returns stdout, stderr and the exit code.
func (d *daemon) berth(args ...string) (string, string, int) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, berthBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "BERTH_SERVER=http://"+d.listen, api.TokenEnv+"="+d.token())
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("berth %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

func (d *daemon) client() *api.Client {
	c := api.NewClient("http://" + d.listen)
	c.Token = d.token()
	return c
}

// token is the admin API token `berth run` created in its state directory.
func (d *daemon) token() string {
	d.t.Helper()
	tok, err := api.ReadTokenFile(api.TokenPath(filepath.Join(d.dir, "state")))
	if err != nil {
		d.t.Fatal(err)
	}
	return tok
}

func (d *daemon) instances() []api.Instance {
	d.t.Helper()
	out, errOut, code := d.berth("instances", "--json")
	if code != 0 {
		d.t.Fatalf("berth instances: %s", errOut)
	}
	var list api.InstanceList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		d.t.Fatalf("berth instances --json: %v\n%s", err, out)
	}
	return list.Instances
}

func (d *daemon) job(id string) api.Job {
	d.t.Helper()
	j, err := d.client().Job(context.Background(), id)
	if err != nil {
		d.t.Fatal(err)
	}
	return j
}

func (d *daemon) submit(args ...string) string {
	d.t.Helper()
	out, errOut, code := d.berth(append([]string{"submit"}, args...)...)
	if code != 0 {
		d.t.Fatalf("berth submit %v: exit %d: %s", args, code, errOut)
	}
	return strings.TrimSpace(out)
}

func (d *daemon) waitJobs(timeout time.Duration, ids ...string) []api.Job {
	d.t.Helper()
	var jobs []api.Job
	waitFor(d.t, timeout, fmt.Sprintf("jobs %v to end", ids), func() bool {
		jobs = jobs[:0]
		for _, id := range ids {
			j := d.job(id)
			if j.State == api.JobQueued || j.State == api.JobRunning {
				return false
			}
			jobs = append(jobs, j)
		}
		return true
	})
	return jobs
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeSandboxes deletes every sandbox of a local provider state directory,
// so that no test leaves processes behind.
func removeSandboxes(t *testing.T, stateDir string) {
	if _, err := os.Stat(stateDir); err != nil {
		return
	}
	p := local.New()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.Init(ctx, provider.Settings{StateDir: stateDir}); err != nil {
		// Init runs a probe sandbox, which can time out on a machine still
		// loaded by thousands of sandboxes: kill them directly instead of
		// leaving them running.
		n := killSandboxes(stateDir)
		t.Logf("cleanup: init local provider on %s: %v; killed %d sandbox processes instead", stateDir, err, n)
		return
	}
	var ids []string
	p.Update(ctx, func(id string, _ provider.State) { ids = append(ids, id) })
	if len(ids) > 0 {
		if _, err := p.Decrease(ctx, ids); err != nil {
			t.Logf("cleanup: delete sandboxes %v: %v", ids, err)
		}
	}
}

// killSandboxes sends SIGKILL to every sandbox process under the provider
// state directory (their PID 1s drop SIGTERM) and returns how many.
func killSandboxes(stateDir string) int {
	killed := 0
	for pid := range sandboxtest.Processes(filepath.Dir(filepath.Dir(stateDir))) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}

// sandboxDirs lists the instance directories the local provider keeps.
func sandboxDirs(t *testing.T, d *daemon) []string {
	entries, _ := os.ReadDir(filepath.Join(d.dir, "state", "provider", "local", "local", "instances"))
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// sandboxProcesses maps the PIDs of this daemon's sandbox processes to their instance IDs.
func sandboxProcesses(d *daemon) map[int]string {
	return sandboxtest.Processes(filepath.Join(d.dir, "state"))
}
