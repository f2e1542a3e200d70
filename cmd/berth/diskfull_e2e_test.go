package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 9, item 4: a full disk at start was blamed on a damaged state file
// or on missing namespaces. berth now says the disk is full, and where. The
// test needs a small full file system: a tmpfs, which needs mount rights.
func TestFullDiskAtStartIsCalledAFullDisk(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root with CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	filler := make([]byte, st.Bavail*uint64(st.Bsize))
	os.WriteFile(filepath.Join(mnt, "filler"), filler, 0o600) // fails part-way with ENOSPC: that is the point
	state := filepath.Join(mnt, "state")
	os.Mkdir(state, 0o700)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, berthBin, "run", "--state-dir", state, "--listen", "127.0.0.1:0").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("berth run on a full disk: %v\n%s", err, out)
	}
	msg := string(out)
	if !strings.Contains(msg, "the disk holding "+state+" is full") || strings.Contains(msg, "namespaces") || strings.Contains(msg, "damaged") {
		t.Fatalf("berth run on a full disk said:\n%s\nwant: the disk holding %s is full", msg, state)
	}
	if fi, err := os.Stat(filepath.Join(state, "state.db")); err == nil {
		t.Fatalf("a %d-byte state.db was left behind; the next start would refuse it", fi.Size())
	}
}
