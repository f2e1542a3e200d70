//go:build linux

package security_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
)

const groupsEnv = "BERTH_SECURITY_GROUPS_CHILD"

// TestSupplementaryGroups runs the provider as nobody with a supplementary
// group, as an unprivileged berth of a real account would. Group 42
// (shadow on Debian) reads /etc/shadow, which others cannot: Init must
// refuse, naming the file and keep_groups. A group that owns nothing under
// the host paths (most of an account's groups: sudo, audio, plugdev)
// opens nothing to jobs: Init must start.
func TestSupplementaryGroups(t *testing.T) {
	switch os.Getenv(groupsEnv) {
	case "refuse":
		_, err := local.New().Init(context.Background(), provider.Settings{StateDir: t.TempDir()})
		if !errors.Is(err, local.ErrSupplementaryGroups) || !strings.Contains(err.Error(), "keep_groups") || !strings.Contains(err.Error(), "/etc/shadow") {
			t.Fatalf("Init with supplementary group 42 returned %v, want ErrSupplementaryGroups naming /etc/shadow and keep_groups", err)
		}
		return
	case "start":
		p := local.New()
		if _, err := p.Init(context.Background(), provider.Settings{StateDir: t.TempDir()}); err != nil {
			t.Fatalf("Init with a supplementary group that owns nothing: %v", err)
		}
		return
	}
	if os.Geteuid() != 0 || os.Getenv(unprivEnv) != "" {
		t.Skip("needs root to start a process with supplementary groups")
	}
	if fi, err := os.Stat("/etc/shadow"); err != nil || fi.Sys().(*syscall.Stat_t).Gid != 42 || fi.Mode().Perm()&0o044 != 0o040 {
		t.Skip("/etc/shadow is not readable by group 42 only here (Debian's layout)")
	}
	self, err := os.Executable()
	must(t, err)
	dir, err := os.MkdirTemp("", "berth-groups-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o777))
	bin := dir + "/security.test"
	b, err := os.ReadFile(self)
	must(t, err)
	must(t, os.WriteFile(bin, b, 0o755))
	for _, c := range []struct{ group, want string }{{"42", "refuse"}, {"4242", "start"}} {
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--groups="+c.group, bin, "-test.run=^TestSupplementaryGroups$", "-test.count=1")
		cmd.Dir = dir
		cmd.Env = []string{groupsEnv + "=" + c.want, "TMPDIR=" + dir, "HOME=" + dir, "PATH=" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "PASS") {
			t.Errorf("as nobody in group %s (want Init to %s): %v\n%s", c.group, c.want, err, out)
		}
	}
}
