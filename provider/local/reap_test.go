//go:build linux

package local

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Berth waits for every sandbox it starts. With a blocking wait per sandbox
// each one held an OS thread, and Go aborts at 10,000 threads; waiting on
// pidfds through the netpoller must hold none, and must still reap every
// process once it ends.
func TestReapHoldsNoThreadPerProcess(t *testing.T) {
	const n = 200
	before := threads(t)
	pids := make([]int, n)
	dones := make([]<-chan struct{}, n)
	for i := range n {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pids[i] = cmd.Process.Pid
		done, err := reapInBackground(cmd)
		if err != nil {
			unix.Kill(pids[i], unix.SIGKILL)
			t.Fatal(err)
		}
		dones[i] = done
	}
	// Let any thread a blocked waiter would take be created.
	time.Sleep(200 * time.Millisecond)
	during := threads(t)
	for _, pid := range pids {
		unix.Kill(pid, unix.SIGKILL)
	}
	for i, done := range dones {
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("process %d was killed but not reaped within a minute", pids[i])
		}
		if zombie(pids[i]) {
			t.Errorf("process %d is a zombie after its reaper finished", pids[i])
		}
	}
	t.Logf("threads: %d before, %d with %d processes waited for", before, during, n)
	if during-before >= n/4 {
		t.Errorf("waiting for %d processes took %d more OS threads (%d -> %d); want far fewer than one per process",
			n, during-before, before, during)
	}
}

// A process that has already exited when berth starts waiting is reaped too.
func TestReapProcessThatExitedFirst(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for !zombie(cmd.Process.Pid) {
		time.Sleep(time.Millisecond)
	}
	pid := cmd.Process.Pid
	done, err := reapInBackground(cmd)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("an exited process was not reaped within a minute")
	}
	if zombie(pid) {
		t.Errorf("process %d is still a zombie", pid)
	}
}

// threads is this process's OS thread count.
func threads(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads line in /proc/self/status")
	return 0
}

// zombie reports whether pid is an exited, unreaped process.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}
