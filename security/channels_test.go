//go:build linux

package security_test

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// sharedHostDir makes a host directory outside /tmp (which sandboxes cover
// with their own) that jobs may see through host_paths, with a unix socket
// anyone may connect to and a file the host keeps using, as another
// tenant's service would.
func sharedHostDir(t *testing.T) (dir, sock, file string) {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "berth-shared-")
	if err != nil {
		t.Skipf("no /var/tmp to share with jobs: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	sock, file = filepath.Join(dir, "service.sock"), filepath.Join(dir, "shared")
	must(t, os.WriteFile(file, []byte("x"), 0o644))
	ln, err := net.Listen("unix", sock)
	must(t, err)
	t.Cleanup(func() { ln.Close() })
	must(t, os.Chmod(sock, 0o777))
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	// The host, or another sandbox, uses the file all the time.
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				os.ReadFile(file)
				// Rewritten in place, never truncated: a job's cat
				// must not catch it empty.
				if f, err := os.OpenFile(file, os.O_WRONLY, 0); err == nil {
					f.WriteAt([]byte("x"), 0)
					f.Close()
				}
			}
		}
	}()
	return dir, sock, file
}

func hostPathsWith(dir string) string {
	return `{"host_paths": ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "` + dir + `"]}`
}

// TestIsolatedJobsCannotReachHostChannels: with network = "isolated", a
// unix socket and a busy file under an allowlisted host path are neither
// reachable (connect) nor observable (inotify) from a job.
func TestIsolatedJobsCannotReachHostChannels(t *testing.T) {
	dir, sock, file := sharedHostDir(t)
	f := newFixture(t, hostPathsWith(dir))
	if code, out := f.job(f.a, "cat "+file); code != 0 || out != "x" {
		t.Fatalf("the shared host path is not visible in the job: exit %d %q", code, out)
	}
	for _, a := range []attack{
		{"connect to a host unix socket under a host path", "/berth/attack unix " + sock, "blocked: .*connection refused"},
		{"watch a shared host file with inotify", "/berth/attack watch " + file + " 1s", "blocked: no event"},
	} {
		t.Run(a.name, func(t *testing.T) {
			code, out := f.job(f.a, a.script)
			if code == 0 || strings.Contains(out, "WORKED") {
				t.Fatalf("attack worked (exit %d):\n%s", code, out)
			}
			if !regexp.MustCompile(a.blocked).MatchString(out) {
				t.Errorf("attack failed, but not for the expected reason %q:\n%s", a.blocked, out)
			}
		})
	}
}

// TestHostNetworkSharesHostChannels is the control, and what the docs warn
// of: with network = "host" the same socket is reachable.
func TestHostNetworkSharesHostChannels(t *testing.T) {
	dir, sock, _ := sharedHostDir(t)
	f := newFixture(t, `{"network": "host", `+strings.TrimPrefix(hostPathsWith(dir), "{"))
	if code, out := f.job(f.a, "/berth/attack unix "+sock); code != 0 || !strings.Contains(out, "WORKED") {
		t.Fatalf("with network host a job cannot reach the host socket: %d %q", code, out)
	}
}
