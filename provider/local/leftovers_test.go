//go:build linux

package local_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
)

// A creation makes the instance's cgroups before it renames the instance
// directory into place. A berth killed in between leaves a dot directory
// and empty cgroups; the next Init removes both, and leaves the cgroups of
// live instances alone.
func TestInitRemovesCgroupsOfInterruptedCreations(t *testing.T) {
	dir := t.TempDir()
	p1 := newGroup(t, dir, "")
	id := startOne(t, p1)
	m := readMeta(t, dir, id)
	if m.Cgroup == "" {
		t.Skip("no cgroups here (unprivileged, or no writable cgroup v2 tree)")
	}
	const lost = "local-00000000ff"
	orphans := []string{filepath.Join(filepath.Dir(m.Cgroup), lost)}
	if m.PidsCgroup != "" {
		orphans = append(orphans, filepath.Join(filepath.Dir(m.PidsCgroup), lost))
	}
	for _, o := range orphans {
		if err := os.Mkdir(o, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(o) })
	}
	half := filepath.Join(dir, "local", "instances", ".new-"+lost)
	if err := os.Mkdir(half, 0o700); err != nil {
		t.Fatal(err)
	}
	p1.Shutdown(context.Background())

	p2 := local.New()
	if _, err := p2.Init(context.Background(), provider.Settings{StateDir: dir}); err != nil {
		t.Fatal(err)
	}
	defer p2.Shutdown(context.Background())
	for _, o := range orphans {
		if _, err := os.Stat(o); !os.IsNotExist(err) {
			t.Errorf("cgroup %s of the interrupted creation is still there (%v)", o, err)
		}
	}
	if _, err := os.Stat(half); !os.IsNotExist(err) {
		t.Errorf("directory %s of the interrupted creation is still there (%v)", half, err)
	}
	for _, live := range []string{m.Cgroup, m.PidsCgroup} {
		if _, err := os.Stat(live); live != "" && err != nil {
			t.Errorf("cgroup %s of the live instance %s is gone: %v", live, id, err)
		}
	}
	if got := states(t, p2)[id]; got != provider.StateRunning {
		t.Errorf("after Init, %s is %q, want running", id, got)
	}
}
