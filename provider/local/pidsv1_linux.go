package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Hybrid hosts (cgroup v2 mounted beside v1 controllers, like many
// systemd hosts in "hybrid" mode) give the v2 tree no pids controller. There
// the pids limit uses the v1 pids hierarchy: each instance gets
// <berth's v1 pids cgroup>/berth-local-GROUP/ID with pids.max, and the
// sandbox's PID 1 is moved into it right after it starts, before it runs
// anything but its own setup.

// findPidsV1 returns the v1 pids cgroup directory of the calling process.
func findPidsV1() (string, error) {
	hasPids := func(list string) bool { return strings.Contains(","+list+",", ",pids,") }
	return ownCgroup("cgroup", hasPids, hasPids)
}

// newPidsV1 returns the group's v1 pids directory when it can be used.
func newPidsV1(group string) string {
	own, err := findPidsV1()
	if err != nil {
		return ""
	}
	dir := filepath.Join(own, "berth-local-"+group)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return ""
	}
	if _, err := os.Stat(filepath.Join(dir, "pids.max")); err != nil {
		os.Remove(dir)
		return ""
	}
	return dir
}

// pidsV1Create makes the v1 pids cgroup of one instance with its limit.
func pidsV1Create(groupDir, id string, max int) (string, error) {
	dir := filepath.Join(groupDir, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create pids cgroup %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
		os.Remove(dir)
		return "", fmt.Errorf("set pids.max of %s: %w", dir, err)
	}
	return dir, nil
}

// pidsV1Add moves pid (with its threads) into dir.
func pidsV1Add(dir string, pid int) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("move sandbox %d into %s: %w", pid, dir, err)
	}
	return nil
}

// pidsV1Remove removes an instance's v1 pids cgroup once its processes
// are gone; exiting tasks may keep it busy for a moment.
func pidsV1Remove(dir string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("remove pids cgroup %s: %w", dir, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
