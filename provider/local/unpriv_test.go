//go:build linux

package local_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// unprivEnv marks the copy of the test binary that TestUnprivileged runs as
// nobody.
const unprivEnv = "BERTH_LOCAL_TEST_UNPRIVILEGED"

// TestUnprivileged re-runs this package's tests as nobody (uid 65534) with
// setpriv, so that the user namespace path is tested even when CI runs as
// root. Run unprivileged, the other tests cover it directly.
func TestUnprivileged(t *testing.T) {
	if os.Getenv(unprivEnv) != "" {
		if os.Geteuid() == 0 {
			t.Fatal("setpriv did not drop root")
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: every other test covers the user-namespace path")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to test unprivileged sandboxes as root: %v", err)
	}
	// The go test build directory is private to root; copy the binary
	// where nobody can run it.
	dir, err := os.MkdirTemp("", "berth-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "local.test")
	if err := copyFile(self, bin); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	args := []string{"--reuid=65534", "--regid=65534", "--clear-groups", bin,
		"-test.run", "^(TestConformance|TestSandboxLooksLikeAMachine|TestDisconnectKillsCommand|TestOutlivesProvider|TestDeadSandboxReported|TestSuspendSurvivesRestart|TestPidsLimit|TestUnprivileged)$",
		"-test.count=1"}
	if testing.Verbose() {
		args = append(args, "-test.v")
	}
	cmd := exec.Command(setpriv, args...)
	cmd.Dir = tmp
	cmd.Env = []string{unprivEnv + "=1", "TMPDIR=" + tmp, "HOME=" + tmp, "PATH=" + os.Getenv("PATH")}
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
