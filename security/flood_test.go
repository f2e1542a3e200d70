//go:build linux

package security_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/executor"
)

// sandboxNoFile reads the soft descriptor limit berth gave the sandbox
// process of instance id, from /proc.
func (f *fixture) sandboxNoFile(id string) int {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.instDir(id), "sandbox.pid"))
	must(f.t, err)
	var pid int
	fmt.Sscan(string(b), &pid)
	lf, err := os.Open(fmt.Sprintf("/proc/%d/limits", pid))
	must(f.t, err)
	defer lf.Close()
	sc := bufio.NewScanner(lf)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Max open files"); ok {
			var n int
			fmt.Sscan(rest, &n)
			return n
		}
	}
	f.t.Fatalf("no Max open files in /proc/%d/limits", pid)
	return 0
}

// raiseNoFile lets the test itself hold n more descriptors, or fails it.
func raiseNoFile(t *testing.T, n int) {
	t.Helper()
	var l syscall.Rlimit
	must(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l))
	want := uint64(n + 1024)
	if l.Cur >= want {
		return
	}
	if l.Max < want {
		l.Max = want // only root may raise the hard limit
	}
	l.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatalf("cannot raise the test's own descriptor limit to %d to flood the sandbox's %d: %v", want, n, err)
	}
}

// TestSSHFloodDoesNotKillSandbox holds more idle TCP connections to a
// sandbox's SSH port than the sandbox may have descriptors (no credentials
// needed: the port is on the host's loopback), then keeps opening more,
// and checks that jobs still run on it meanwhile and afterwards.
func TestSSHFloodDoesNotKillSandbox(t *testing.T) {
	f := newFixture(t, "")
	ci, err := f.p.ConnectInfo(f.ctx, f.a)
	must(t, err)
	n := f.sandboxNoFile(f.a) + 256
	raiseNoFile(t, n)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	refused := 0
	for range n {
		c, err := net.DialTimeout("tcp", ci.Addr, 5*time.Second)
		if err != nil {
			refused++
			continue
		}
		conns = append(conns, c)
	}
	t.Logf("holding %d idle connections to %s (%d refused)", len(conns), ci.Addr, refused)

	// An attacker that keeps opening connections, as fast as it can.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var opened atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", ci.Addr, time.Second)
				if err == nil {
					opened.Add(1)
					time.AfterFunc(time.Second, func() { c.Close() })
				}
			}
		}()
	}
	start := time.Now()
	code, out := f.job(f.a, "echo alive")
	took := time.Since(start)
	close(stop)
	wg.Wait()
	if code != 0 || out != "alive\n" {
		t.Fatalf("job during the flood: exit %d %q", code, out)
	}
	t.Logf("a job ran in %v while %d idle connections were held and %d more opened", took, len(conns), opened.Load())
	if code, out := f.job(f.a, "echo alive"); code != 0 || out != "alive\n" {
		t.Fatalf("job after the flood: exit %d %q", code, out)
	}
	if code, out := f.job(f.b, "echo alive"); code != 0 || out != "alive\n" {
		t.Fatalf("job on the other sandbox: exit %d %q", code, out)
	}
}

// TestHostNetworkJobCannotKillAnotherSandbox: a job with network = "host"
// floods another tenant's sandbox's SSH port with more idle connections
// than that sandbox may have descriptors, while the other tenant runs a
// job; that job must finish and the sandbox must live on.
func TestHostNetworkJobCannotKillAnotherSandbox(t *testing.T) {
	f := newFixture(t, `{"network": "host"}`)
	ci2, err := f.p.ConnectInfo(f.ctx, f.b)
	must(t, err)
	n := f.sandboxNoFile(f.b) + 256
	f.job(f.a, "true") // puts the attack helper in place
	attacked := make(chan string, 1)
	go func() {
		ci, err := f.p.ConnectInfo(f.ctx, f.a)
		if err != nil {
			attacked <- err.Error()
			return
		}
		var out bytes.Buffer
		executor.Run(f.ctx, ci, executor.Command{Script: fmt.Sprintf("/berth/attack flood %s %d /berth", ci2.Addr, n), Output: &out})
		attacked <- out.String()
	}()
	// The victim's job starts once the attacker holds its connections.
	aDisk := filepath.Join(f.instDir(f.a), "disk")
	for end := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(aDisk, "flooding")); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the attacker never held its connections")
		}
	}
	code, out := f.job(f.b, "echo alive")
	must(t, os.WriteFile(filepath.Join(aDisk, "stop"), nil, 0o644))
	t.Logf("attacker: %s", strings.TrimSpace(<-attacked))
	if code != 0 || out != "alive\n" {
		t.Fatalf("the victim's job during the flood: exit %d %q", code, out)
	}
	if code, out := f.job(f.b, "echo alive"); code != 0 || out != "alive\n" {
		t.Fatalf("the victim's sandbox after the flood: exit %d %q", code, out)
	}
}
