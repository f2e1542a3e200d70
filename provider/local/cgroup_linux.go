package local

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// cgroupRoot is the cgroup v2 directory under which each instance gets its
// own cgroup. It is nil when no writable cgroup v2 tree with cgroup.kill and
// cgroup.freeze exists (unprivileged users, cgroup v1 only hosts).
type cgroupRoot struct {
	dir string
	// pidsV1 is the group's cgroup v1 pids directory, used for the pids
	// limit when the v2 tree has no pids controller; empty otherwise.
	pidsV1 string
	// controllers are the v2 controllers instance cgroups get.
	controllers []string

	// mu serialises making dir (with its controllers) against tidy
	// removing it; enabled says that dir exists with its controllers
	// enabled, so that a creation need not write cgroup.subtree_control
	// three times again (it did, for every sandbox).
	mu      sync.Mutex
	enabled bool
}

// has reports whether instance cgroups get the v2 controller ctl.
func (c *cgroupRoot) has(ctl string) bool {
	for _, x := range c.controllers {
		if x == ctl {
			return true
		}
	}
	return false
}

// findCgroup2 returns the cgroup v2 directory of the calling process, found
// at run time from /proc/self/mountinfo and /proc/self/cgroup because it
// lives at /sys/fs/cgroup on unified hosts but elsewhere (e.g.
// /sys/fs/cgroup/unified) on hybrid ones.
func findCgroup2() (string, error) {
	return ownCgroup("cgroup2",
		func(string) bool { return true },
		func(ctrls string) bool { return ctrls == "" }) // the v2 line is "0::PATH"
}

// ownCgroup finds the calling process's directory in a cgroup hierarchy:
// the first mount of fstype whose super options satisfy mount, joined with
// the path of the /proc/self/cgroup line whose controller list satisfies
// line, relative to the mount's root.
func ownCgroup(fstype string, mount func(superOpts string) bool, line func(controllers string) bool) (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	var mnt, mntRoot string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) >= 5 && len(qf) >= 3 && qf[0] == fstype && mount(qf[2]) {
			mntRoot, mnt = pf[3], pf[4]
			break
		}
	}
	if mnt == "" {
		return "", fmt.Errorf("no %s mount", fstype)
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		// HIERARCHY-ID:CONTROLLERS:PATH
		parts := strings.SplitN(l, ":", 3)
		if len(parts) == 3 && line(parts[1]) {
			return filepath.Join(mnt, strings.TrimPrefix(parts[2], mntRoot)), nil
		}
	}
	return "", fmt.Errorf("process has no %s path", fstype)
}

// newCgroupRoot checks that instance cgroups can be made under
// OWN/berth-local-GROUP. It returns nil when that is not possible, which
// selects the fallbacks. The directory is removed again whenever it is
// empty, so that short-lived groups (tests) leave no cgroups behind.
func newCgroupRoot(group string) *cgroupRoot {
	own, err := findCgroup2()
	if err != nil {
		return nil
	}
	c := &cgroupRoot{dir: filepath.Join(own, "berth-local-"+group)}
	if err := os.Mkdir(c.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil
	}
	defer c.tidy()
	c.enableControllers()
	for _, f := range []string{"cgroup.kill", "cgroup.freeze", "cgroup.procs"} {
		if _, err := os.Stat(filepath.Join(c.dir, f)); err != nil {
			return nil
		}
	}
	ctl, _ := os.ReadFile(filepath.Join(c.dir, "cgroup.subtree_control"))
	c.controllers = strings.Fields(string(ctl))
	if !c.has("pids") {
		c.pidsV1 = newPidsV1(group)
	}
	return c
}

// enableControllers lets instance cgroups have the controllers for the
// limits, where the parent offers them; what is not offered stays
// unlimited (or is an error in create when a limit was set explicitly).
func (c *cgroupRoot) enableControllers() {
	for _, ctl := range []string{"+memory", "+cpu", "+pids"} {
		os.WriteFile(filepath.Join(c.dir, "cgroup.subtree_control"), []byte(ctl), 0)
	}
}

// tidy removes the group's cgroup directory if no instance uses it.
func (c *cgroupRoot) tidy() {
	c.mu.Lock()
	if os.Remove(c.dir) == nil {
		c.enabled = false
	}
	c.mu.Unlock()
	if c.pidsV1 != "" {
		os.Remove(c.pidsV1)
	}
}

// create makes the cgroup of one instance and applies the limits of cfg.
func (c *cgroupRoot) create(id string, cfg Config) (string, error) {
	dir := filepath.Join(c.dir, id)
	c.mu.Lock()
	var err error
	if !c.enabled {
		if err = os.Mkdir(c.dir, 0o755); err == nil || errors.Is(err, os.ErrExist) {
			c.enableControllers()
			c.enabled = true
		}
	}
	if c.enabled {
		if err = os.Mkdir(dir, 0o755); errors.Is(err, os.ErrExist) {
			err = nil
		}
	}
	c.mu.Unlock()
	if err != nil {
		return "", fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	pids, explicitPids := defaultPidsMax, cfg.PidsMax != nil
	if explicitPids {
		pids = *cfg.PidsMax
	}
	limits := []struct {
		file, key, value, ctl string
		explicit              bool
	}{
		{"memory.max", "memory_max", cfg.MemoryMax, "memory", cfg.MemoryMax != ""},
		{"cpu.max", "cpu_max", cfg.CPUMax, "cpu", cfg.CPUMax != ""},
		{"pids.max", "pids_max", strconv.Itoa(pids), "pids", explicitPids && pids > 0},
	}
	if c.pidsV1 != "" {
		limits = limits[:2] // pids.max goes to the v1 hierarchy: see pidsV1Create
	}
	for _, l := range limits {
		if l.value == "" || l.value == "0" {
			continue
		}
		path := filepath.Join(dir, l.file)
		if !l.explicit && !c.has(l.ctl) {
			// The default pids limit applies where the controller is
			// enabled; hybrid and delegated-without-pids hosts go
			// without.
			continue
		}
		if err := os.WriteFile(path, []byte(l.value), 0); err != nil {
			os.Remove(dir)
			return "", fmt.Errorf("set %s of %s to %q: %w (provider_config %s needs the cgroup v2 controller enabled for berth's cgroup; remove the key or enable the controller)", l.file, dir, l.value, err, l.key)
		}
	}
	return dir, nil
}

// cgroupEvent reports the value of key ("populated", "frozen") in
// cgroup.events.
func cgroupEvent(dir, key string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no %q in %s/cgroup.events", key, dir)
}

// waitCgroup polls cgroup.events until key has value want.
func waitCgroup(dir, key, want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		v, err := cgroupEvent(dir, key)
		if err != nil {
			return err
		}
		if v == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: %s is still %s after %v", dir, key, v, timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cgroupKill kills every process in dir and removes it. A missing cgroup
// counts as done, which keeps Decrease idempotent.
func cgroupKill(dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		return fmt.Errorf("kill cgroup %s: %w", dir, err)
	}
	if err := waitCgroup(dir, "populated", "0", 10*time.Second); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

// cgroupFreeze freezes (or thaws) every process in dir and waits until the
// kernel confirms.
func cgroupFreeze(dir string, freeze bool) error {
	v := "0"
	if freeze {
		v = "1"
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.freeze"), []byte(v), 0); err != nil {
		return fmt.Errorf("write %s/cgroup.freeze: %w", dir, err)
	}
	return waitCgroup(dir, "frozen", v, 10*time.Second)
}

func cgroupFrozen(dir string) bool {
	v, err := cgroupEvent(dir, "frozen")
	return err == nil && v == "1"
}
