//go:build linux

package security_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
)

const groupsEnv = "BERTH_SECURITY_GROUPS_CHILD"

// TestRefusesSupplementaryGroups runs the provider as nobody with
// supplementary group 42 (shadow on Debian), as an unprivileged berth in
// such a group would: Init must refuse, since jobs would keep the group.
func TestRefusesSupplementaryGroups(t *testing.T) {
	if os.Getenv(groupsEnv) != "" {
		_, err := local.New().Init(context.Background(), provider.Settings{StateDir: t.TempDir()})
		if !errors.Is(err, local.ErrSupplementaryGroups) || !strings.Contains(err.Error(), "keep_groups") {
			t.Fatalf("Init with supplementary groups returned %v, want ErrSupplementaryGroups naming keep_groups", err)
		}
		return
	}
	if os.Geteuid() != 0 || os.Getenv(unprivEnv) != "" {
		t.Skip("needs root to start a process with supplementary groups")
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
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--groups=42", bin, "-test.run=^TestRefusesSupplementaryGroups$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = []string{groupsEnv + "=1", "TMPDIR=" + dir, "HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("as nobody in group 42: %v\n%s", err, out)
	}
}
