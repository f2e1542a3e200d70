// Package sandboxtest finds and kills the local provider's sandbox processes
// from outside berth, the way an operator or a crashing VM would, so tests can
// check for orphans and lose instances on purpose.
package sandboxtest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// marker is the environment variable every sandbox process carries; its value
// is the instance's directory (see provider/local).
const marker = "BERTH_LOCAL_SANDBOX="

// Processes maps the PIDs of sandbox processes whose instance directory lies
// under dir to their instance IDs, read from /proc.
func Processes(dir string) map[int]string {
	prefix := marker + strings.TrimSuffix(dir, "/") + "/"
	procs := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if strings.HasPrefix(kv, prefix) {
				procs[pid] = filepath.Base(kv)
			}
		}
	}
	return procs
}

// Kill sends SIGKILL to every process of instance id under dir and returns
// how many it killed.
func Kill(dir, id string) int {
	killed := 0
	for pid, inst := range Processes(dir) {
		if inst == id && syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed
}

// RerunAsNobody runs a copy of the current test binary as nobody (uid
// 65534) through setpriv, with env and the test flags args, so that a
// package's tests also cover unprivileged sandboxes when CI runs as root.
// marker names the environment variable that tells the copy it is the
// unprivileged run: there, RerunAsNobody checks that root was dropped and
// returns at once. It skips when the tests already run unprivileged.
func RerunAsNobody(t *testing.T, marker string, env []string, args ...string) {
	t.Helper()
	if os.Getenv(marker) != "" {
		if os.Geteuid() == 0 {
			t.Fatal("setpriv did not drop root")
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the other tests cover the unprivileged sandbox directly")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to test unprivileged sandboxes as root: %v", err)
	}
	// The go test build directory is private to root: copy the binary
	// where nobody can run it.
	dir, err := os.MkdirTemp("", "berth-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(self))
	tmp := filepath.Join(dir, "tmp")
	for _, err := range []error{os.Chmod(dir, 0o755), copyFile(self, bin), os.Mkdir(tmp, 0o700), os.Chown(tmp, 65534, 65534)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	full := append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.count=1"}, args...)
	if testing.Verbose() {
		full = append(full, "-test.v")
	}
	cmd := exec.Command(setpriv, full...)
	cmd.Dir = tmp
	cmd.Env = append([]string{marker + "=1", "TMPDIR=" + tmp, "HOME=" + tmp, "PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	t.Logf("unprivileged run:\n%s", out)
	if err != nil {
		t.Fatalf("tests failed as nobody: %v", err)
	}
	if !strings.Contains(string(out), "PASS") {
		t.Fatal("no PASS in the unprivileged run")
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
