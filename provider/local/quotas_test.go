//go:build linux

package local_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// A sandbox's user namespace holds its own per-user kernel object limits,
// so one job cannot take every inotify instance or namespace berth's user
// may have on the host. (A job sees those of its own nested namespace, so
// the test reads PID 1's.)
func TestSandboxHoldsItsUserQuotas(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("entering the sandbox's user namespace needs root")
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Skip("no nsenter")
	}
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	id := startOne(t, p)
	pid := strconv.Itoa(readMeta(t, dir, id).PID)
	for name, want := range map[string]string{"max_inotify_instances": "16", "max_inotify_watches": "65536", "max_user_namespaces": "64", "max_mnt_namespaces": "64"} {
		out, err := exec.Command(nsenter, "-t", pid, "-U", "cat", "/proc/sys/user/"+name).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != want {
			t.Errorf("sandbox's %s is %q (%v), want %s", name, got, err, want)
		}
	}
}
