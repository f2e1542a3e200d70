//go:build linux

package security_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	builtOnce sync.Once
	builtPath string
	builtErr  error
)

// TestUnprivileged re-runs the whole suite as nobody (uid 65534) with
// setpriv, so that both modes are attacked whoever runs the tests.
func TestUnprivileged(t *testing.T) {
	if os.Getenv(unprivEnv) != "" {
		if os.Geteuid() == 0 {
			t.Fatal("setpriv did not drop root")
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the other tests attack the unprivileged sandbox directly")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to test unprivileged sandboxes as root: %v", err)
	}
	attack := attackBinary(t)
	dir, err := os.MkdirTemp("", "berth-security-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	self, err := os.Executable()
	must(t, err)
	bin := filepath.Join(dir, "security.test")
	must(t, copyFile(self, bin))
	tmp := filepath.Join(dir, "tmp")
	must(t, os.Mkdir(tmp, 0o700))
	must(t, os.Chown(tmp, 65534, 65534))
	args := []string{"--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.count=1"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.Command(setpriv, args...)
	cmd.Dir = tmp
	cmd.Env = []string{unprivEnv + "=1", attackEnv + "=" + attack, "TMPDIR=" + tmp, "HOME=" + tmp, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	t.Logf("unprivileged run:\n%s", out)
	if err != nil {
		t.Fatalf("attack suite failed as nobody: %v", err)
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
