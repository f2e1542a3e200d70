//go:build linux

package local_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
)

// parentOf returns the parent PID of pid from /proc.
func parentOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PPid:"); ok {
			ppid, _ := strconv.Atoi(strings.TrimSpace(v))
			return ppid
		}
	}
	t.Fatalf("no PPid in /proc/%d/status", pid)
	return 0
}

// waitExited waits until pid is no process any more (reaped).
func waitExited(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d still there after 10s", pid)
		}
	}
}

// Sandboxes are started by the spawner, not by berth: their parent is the
// spawner. berth still notices a sandbox that dies (through its pidfd,
// though it is not berth's child) and the spawner reaps it.
func TestSandboxesStartThroughTheSpawner(t *testing.T) {
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	id := startOne(t, p)
	spawner := local.SpawnerPID(p)
	if spawner == 0 || spawner == os.Getpid() {
		t.Fatalf("spawner PID %d: want a process of its own", spawner)
	}
	pid := readMeta(t, dir, id).PID
	if got := parentOf(t, pid); got != spawner {
		t.Errorf("the sandbox's parent is %d, want the spawner %d (this process is %d)", got, spawner, os.Getpid())
	}
	if res := run(t, p, id, "echo hi"); res.Stdout != "hi\n" {
		t.Errorf("command output %q", res.Stdout)
	}
	// What berth inherited without close-on-exec (under go test, a pipe
	// at fd 251) reached the spawner; its sandboxes must not get it.
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fdinfo", spawner))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range fds {
		fd, _ := strconv.Atoi(e.Name())
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%d", spawner, fd))
		var flags string
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "flags:"); ok {
				flags = strings.TrimSpace(v)
			}
		}
		f, _ := strconv.ParseUint(flags, 8, 64)
		if fd >= 3 && f&syscall.O_CLOEXEC == 0 {
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", spawner, fd))
			t.Errorf("the spawner's fd %d (%s, flags %s) is not close-on-exec: sandboxes would inherit it", fd, target, flags)
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	waitExited(t, pid) // reaped by the spawner: no zombie left
	waitState(t, p, id, provider.StateTimeout)
}

// A spawner that dies is replaced at the next sandbox; the sandboxes it
// started run on, and berth still notices when they end.
func TestSpawnerThatDiesIsReplaced(t *testing.T) {
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	first := startOne(t, p)
	old := local.SpawnerPID(p)
	syscall.Kill(old, syscall.SIGKILL)
	waitExited(t, old)
	second := startOne(t, p)
	if now := local.SpawnerPID(p); now == 0 || now == old {
		t.Fatalf("spawner after the first died: %d (the first was %d)", now, old)
	}
	for _, id := range []string{first, second} {
		if res := run(t, p, id, "hostname"); res.Stdout != id+"\n" {
			t.Errorf("%s: hostname %q", id, res.Stdout)
		}
	}
	pid := readMeta(t, dir, first).PID
	syscall.Kill(pid, syscall.SIGKILL)
	waitExited(t, pid) // reaped by init or a subreaper now
	waitState(t, p, first, provider.StateTimeout)
}

// A spawner that stops answering fails the one sandbox it was asked for
// (nothing of it is left), is killed, and the next sandbox gets a new one.
// After spawnerMaxFailures such failures berth starts sandboxes itself.
func TestHungSpawnerIsKilledAndReplaced(t *testing.T) {
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	startOne(t, p)
	for range 3 {
		hung := local.SpawnerPID(p)
		if hung == 0 {
			t.Fatal("no spawner runs")
		}
		syscall.Kill(hung, syscall.SIGSTOP)
		before := len(states(t, p))
		// A short wait only for the stopped spawner: a healthy one on a
		// loaded machine may take longer than this to answer.
		restore := local.SetSpawnerTimeout(200 * time.Millisecond)
		n, err := p.Increase(context.Background(), 1)
		restore()
		if n != 0 || err == nil || !strings.Contains(err.Error(), "spawner") {
			t.Fatalf("Increase with a hung spawner: %d, %v; want 0 and an error naming the spawner", n, err)
		}
		waitExited(t, hung) // killed (SIGKILL works on a stopped process) and reaped
		if after := len(states(t, p)); after != before {
			t.Errorf("the failed sandbox is listed: %d instances, want %d", after, before)
		}
		// The next sandbox starts: through a new spawner, or (after the
		// third failure) from this process.
		id := startOne(t, p)
		want := local.SpawnerPID(p)
		if want == 0 {
			want = os.Getpid()
		}
		if got := parentOf(t, readMeta(t, dir, id).PID); got != want {
			t.Errorf("the new sandbox's parent is %d, want %d", got, want)
		}
	}
	if pid := local.SpawnerPID(p); pid != 0 {
		t.Errorf("after three failed spawners, a fourth runs (%d); want berth to start sandboxes itself", pid)
	}
}

// Spawner failures far apart do not add up: berth keeps replacing the
// spawner instead of turning it off for good after the third.
func TestSpawnerFailuresFarApartDoNotTurnItOff(t *testing.T) {
	defer local.SetSpawnerFailureWindow(time.Nanosecond)()
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	startOne(t, p)
	for i := range 4 {
		dead := local.SpawnerPID(p)
		if dead == 0 {
			t.Fatalf("after %d spawner deaths far apart, no spawner runs: berth turned it off", i)
		}
		syscall.Kill(dead, syscall.SIGKILL)
		waitExited(t, dead)
		id := startOne(t, p)
		if got, want := parentOf(t, readMeta(t, dir, id).PID), local.SpawnerPID(p); want == 0 || got != want {
			t.Fatalf("death %d: the new sandbox's parent is %d, want a new spawner (%d)", i+1, got, want)
		}
	}
}

// BERTH_LOCAL_SPAWNER=off makes berth start sandboxes itself.
func TestSpawnerOff(t *testing.T) {
	t.Setenv("BERTH_LOCAL_SPAWNER", "off")
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	id := startOne(t, p)
	if pid := local.SpawnerPID(p); pid != 0 {
		t.Errorf("spawner %d runs with BERTH_LOCAL_SPAWNER=off", pid)
	}
	if got := parentOf(t, readMeta(t, dir, id).PID); got != os.Getpid() {
		t.Errorf("the sandbox's parent is %d, want this process %d", got, os.Getpid())
	}
}
