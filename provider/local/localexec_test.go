//go:build linux

package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/internal/imagetest"
	"github.com/berth-ci/berth/internal/sandboxtest"
	"github.com/berth-ci/berth/jobroot"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
)

// transports are the two ways the executor reaches a sandbox this process
// started: its exec socket, and SSH (what an adopted sandbox or the plugin
// gets). The local one has its SSH address broken, so that any use of SSH
// fails the test.
func transports(t *testing.T, ci provider.ConnectInfo) map[string]provider.ConnectInfo {
	t.Helper()
	if ci.Local == nil {
		t.Fatalf("ConnectInfo of a sandbox this provider started has no local exec socket")
	}
	viaLocal, viaSSH := ci, ci
	viaLocal.Addr = "127.0.0.1:1"
	viaSSH.Local = nil
	return map[string]provider.ConnectInfo{"local": viaLocal, "ssh": viaSSH}
}

// TestJobsRunTheSameOverTheLocalPathAndSSH runs the executor's scenarios
// on a real sandbox over both transports and expects the same results.
func TestJobsRunTheSameOverTheLocalPathAndSSH(t *testing.T) {
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	id := startOne(t, p)
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for name, ci := range transports(t, ci) {
		t.Run(name, func(t *testing.T) {
			var r executor.Runner
			ctx := context.Background()
			var out bytes.Buffer
			code, err := r.Run(ctx, ci, executor.Command{
				Script: "echo \"out $JOB_VAR $(pwd) $HOSTNAME\"; echo err >&2; exit 3",
				Env:    []string{"JOB_VAR=x y"}, Output: &out,
			})
			// stdout and stderr are copied apart: their order may mix.
			if err != nil || code != 3 || !strings.Contains(out.String(), "out x y /berth "+id+"\n") || !strings.Contains(out.String(), "err\n") {
				t.Fatalf("Run: code %d err %v output %q", code, err, out.String())
			}

			// The job holds no descriptor but its stdio: neither the
			// exec socket nor its command's socket leaks into it. (ls
			// replaces the shell, whose own descriptors come and go.)
			out.Reset()
			if code, err := r.Run(ctx, ci, executor.Command{Script: "exec ls /proc/self/fd", Output: &out}); err != nil || code != 0 || out.String() != "0\n1\n2\n3\n" {
				t.Fatalf("descriptors of a job: %q (code %d, err %v), want only 0 1 2 (and 3, ls reading the directory)", out.String(), code, err)
			}

			// A shell killed by a signal: 128+N. Jobs start with no
			// signal ignored (PID 1 ignores some for itself only), so
			// a TERM kills as on any machine: `timeout`, `kill` work.
			code, err = r.Run(ctx, ci, executor.Command{Script: "kill -KILL $$; sleep 5"})
			if err != nil || code != 137 {
				t.Fatalf("script killed by SIGKILL: code %d err %v, want 137", code, err)
			}
			out.Reset()
			code, err = r.Run(ctx, ci, executor.Command{Script: "grep SigIgn /proc/self/status; kill -TERM $$; sleep 5", Output: &out})
			// Contains, not HasPrefix: over SSH, stdout and stderr are
			// two streams, and the shell's "Terminated" on stderr may
			// arrive before grep's line on stdout.
			if err != nil || code != 143 || !strings.Contains(out.String(), "SigIgn:\t0000000000000000\n") {
				t.Fatalf("script sent itself SIGTERM: code %d err %v output %q, want 143 and no ignored signal", code, err, out.String())
			}

			// stdin in, stdout and stderr apart.
			var got bytes.Buffer
			code, stderr, err := r.Stream(ctx, ci, "tr a-z A-Z; echo oops >&2; exit 2", strings.NewReader("hello stdin"), &got)
			if err != nil || code != 2 || got.String() != "HELLO STDIN" || stderr != "oops\n" {
				t.Fatalf("Stream: code %d err %v stdout %q stderr %q", code, err, got.String(), stderr)
			}
			// A bigger stdin than any socket or pipe buffer.
			big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
			got.Reset()
			code, _, err = r.Stream(ctx, ci, "cat", bytes.NewReader(big), &got)
			if err != nil || code != 0 || !bytes.Equal(got.Bytes(), big) {
				t.Fatalf("Stream of 1 MiB: code %d err %v, got %d bytes back", code, err, got.Len())
			}

			// Cancel kills the whole process group, not only the shell.
			pidFile := "/berth/bg-" + name
			ctx2, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := r.Run(ctx2, ci, executor.Command{Script: "sleep 1000 & echo $! > " + pidFile + "; wait"})
				done <- err
			}()
			waitFor(t, func() bool { return run(t, p, id, "cat "+pidFile+" 2>/dev/null").Stdout != "" })
			pid := strings.TrimSpace(run(t, p, id, "cat "+pidFile).Stdout)
			cancel()
			if err := <-done; !errors.Is(err, executor.ErrCanceled) {
				t.Fatalf("canceled Run: %v, want ErrCanceled", err)
			}
			waitFor(t, func() bool {
				return run(t, p, id, "kill -0 "+pid+" 2>/dev/null && echo alive").Stdout == ""
			})

			// A timeout likewise.
			code, err = r.Run(ctx, ci, executor.Command{Script: "sleep 1000", Timeout: 200 * time.Millisecond})
			if !errors.Is(err, executor.ErrTimeout) {
				t.Fatalf("Run past its timeout: code %d err %v, want ErrTimeout", code, err)
			}
		})
	}
}

// TestLocalPathSandboxKilledMidCommand: a sandbox that dies while a job
// runs gives the same system error as a lost SSH connection.
func TestLocalPathSandboxKilledMidCommand(t *testing.T) {
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	id := startOne(t, p)
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ci = transports(t, ci)["local"]
	var r executor.Runner
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(context.Background(), ci, executor.Command{Script: "echo started; sleep 1000", Output: out})
		done <- err
	}()
	waitFor(t, func() bool { return strings.Contains(out.String(), "started") })
	if sandboxtest.Kill(filepath.Join(dir, "local", "instances"), id) == 0 {
		t.Fatal("no sandbox process to kill")
	}
	select {
	case err := <-done:
		var se *executor.SystemError
		if !errors.As(err, &se) || se.Instance != id || se.Op != "connection lost" {
			t.Fatalf("Run on a killed sandbox: %v, want a *SystemError 'connection lost' naming %s", err, id)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its sandbox was killed")
	}
}

// TestAdoptedSandboxRunsOverSSH: after a berth restart nobody holds the
// sandbox's exec socket any more, so jobs go over SSH; a ConnectInfo that
// crossed the plugin protocol (JSON) never carries the socket either.
func TestAdoptedSandboxRunsOverSSH(t *testing.T) {
	dir := t.TempDir()
	p1 := local.New()
	if _, err := p1.Init(context.Background(), provider.Settings{StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	id := startOne(t, p1)
	ci, err := p1.ConnectInfo(context.Background(), id)
	if err != nil || ci.Local == nil {
		t.Fatalf("ConnectInfo of our own sandbox: %v, Local %v", err, ci.Local)
	}
	b, _ := json.Marshal(ci)
	var overPlugin provider.ConnectInfo
	if err := json.Unmarshal(b, &overPlugin); err != nil || overPlugin.Local != nil {
		t.Fatalf("ConnectInfo through JSON: %v, Local %v; want none", err, overPlugin.Local)
	}
	p1.Shutdown(context.Background())

	p2 := newGroup(t, dir, "")
	ci, err = p2.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if ci.Local != nil {
		t.Fatal("an adopted sandbox got a local exec socket")
	}
	var out bytes.Buffer
	code, err := executor.Run(context.Background(), ci, executor.Command{Script: "echo over ssh; exit 5", Output: &out})
	if err != nil || code != 5 || out.String() != "over ssh\n" {
		t.Fatalf("Run on an adopted sandbox: code %d err %v output %q", code, err, out.String())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// TestLocalPathAcrossSuspendAndResume: a ConnectInfo taken before a
// suspend still runs jobs after the resume, over the local path, whether
// the sandbox was frozen (cgroup) or killed and started again (no cgroup:
// the new process has a new socket).
func TestLocalPathAcrossSuspendAndResume(t *testing.T) {
	p := newGroup(t, t.TempDir(), "")
	id := startOne(t, p)
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ci = transports(t, ci)["local"]
	if _, err := p.Suspend(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, id, provider.StateSuspended)
	if _, err := p.Resume(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	waitState(t, p, id, provider.StateRunning)
	var out bytes.Buffer
	code, err := executor.Run(context.Background(), ci, executor.Command{Script: "echo resumed", Output: &out})
	if err != nil || code != 0 || out.String() != "resumed\n" {
		t.Fatalf("Run after resume: %d %v %q", code, err, out.String())
	}
}

// TestImageJobOverTheLocalPath runs a job in an image with SSH out of
// reach: the runner starts through the exec socket, as over SSH.
func TestImageJobOverTheLocalPath(t *testing.T) {
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	p := newGroup(t, t.TempDir(), `{"network":"host"}`)
	id := startOne(t, p)
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	ci = transports(t, ci)["local"]
	var r executor.Runner
	var out lockedBuffer
	img := executor.ImageJob{Name: ref, Settings: jobroot.Settings{Insecure: []string{host}}}
	code, err := r.RunInImage(context.Background(), ci, executor.Command{Script: "cat /etc/os-release; echo job=$JOB; grep SigIgn /proc/self/status; exit 6", Env: []string{"JOB=yes"}, Output: &out}, img)
	if err != nil || code != 6 || !strings.Contains(out.String(), "NAME=berth-test-image") || !strings.Contains(out.String(), "job=yes") ||
		!strings.Contains(out.String(), "SigIgn:\t0000000000000000") {
		t.Fatalf("RunInImage over the local path: %d %v\n%s", code, err, out.String())
	}
}

// TestRecycleOverTheExecSocket: Recycle and Heartbeat of a sandbox this
// process started go through its exec socket (no SSH handshake per job or
// per heartbeat) and Recycle resets it as over SSH; an adopted sandbox is
// checked and recycled over SSH.
func TestRecycleOverTheExecSocket(t *testing.T) {
	dir := t.TempDir()
	p1 := local.New()
	if _, err := p1.Init(context.Background(), provider.Settings{StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	id := startOne(t, p1)
	run(t, p1, id, "echo left > /berth/left; (sleep 1000 >/dev/null 2>&1 &)")
	if err := p1.Recycle(context.Background(), id); err != nil {
		t.Fatalf("Recycle: %v", err)
	}
	if res := run(t, p1, id, "ls /berth; pgrep sleep || true"); res.Stdout != "" {
		t.Fatalf("after Recycle the sandbox still shows %q", res.Stdout)
	}
	log := filepath.Join(dir, "local", "instances", id, "sandbox.log")
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), `via="exec socket"`) {
		t.Fatalf("the recycle did not come through the exec socket:\n%s", b)
	}
	if ok, err := local.PingLocal(p1, id); !ok || err != nil {
		t.Fatalf("ping through the exec socket: %v %v", ok, err)
	}
	if err := p1.Heartbeat(context.Background(), id); err != nil {
		t.Fatalf("Heartbeat: %v", err)
	}
	p1.Shutdown(context.Background())

	p2 := newGroup(t, dir, "")
	if ok, err := local.PingLocal(p2, id); ok || err != nil {
		t.Fatalf("ping of an adopted sandbox through an exec socket: %v %v, want none", ok, err)
	}
	if err := p2.Heartbeat(context.Background(), id); err != nil {
		t.Fatalf("Heartbeat of an adopted sandbox (SSH): %v", err)
	}
	if err := p2.Recycle(context.Background(), id); err != nil {
		t.Fatalf("Recycle of an adopted sandbox: %v", err)
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "via=ssh") {
		t.Fatalf("the adopted sandbox was not recycled over SSH:\n%s", b)
	}
}

// TestHeartbeatNoticesAWedgedInitProcess: a sandbox whose init process no
// longer answers fails its heartbeat over the exec socket, as it would
// over SSH.
func TestHeartbeatNoticesAWedgedInitProcess(t *testing.T) {
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	id := startOne(t, p)
	pid := readMeta(t, dir, id).PID
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	if err := p.Heartbeat(context.Background(), id); err == nil || !strings.Contains(err.Error(), id) {
		t.Fatalf("Heartbeat of a stopped sandbox: %v, want an error naming %s", err, id)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	if err := p.Heartbeat(context.Background(), id); err != nil {
		t.Fatalf("Heartbeat once it runs again: %v", err)
	}
}

// TestInitProcessShrugsOffSignals: PID 1 catches and drops the signals that
// would end a Go program, from its jobs and from the host alike, so a job
// cannot stop its own sandbox.
func TestInitProcessShrugsOffSignals(t *testing.T) {
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	id := startOne(t, p)
	run(t, p, id, "for s in TERM INT HUP USR1 USR2 QUIT ALRM; do kill -$s 1 2>/dev/null; done; true")
	pid := readMeta(t, dir, id).PID
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGUSR1} {
		if err := syscall.Kill(pid, sig); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	ci, err := p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code, err := executor.Run(context.Background(), ci, executor.Command{Script: "echo still here", Output: &out}); err != nil || code != 0 || out.String() != "still here\n" {
		t.Fatalf("after the signals: %d %v %q", code, err, out.String())
	}
}
