//go:build linux

package local_test

import (
	"strings"
	"syscall"
	"testing"
)

// Issue 43, item 4: inside sandboxes disk_max counted bytes only, so one
// job making 39,500 empty files took every inode of the state dir's file
// system (bytes free) and the next tenant's job failed to create a file.
// With inodes_max (default a quarter of the file system's inodes) the
// first job is killed with a message naming the limit and its files go;
// the other tenant's job then makes its files. The state dir is a tmpfs
// with 40,000 inodes and 256 MiB.
func TestOneJobCannotTakeEveryInode(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256m,nr_inodes=40000,mode=0755"); err != nil {
		t.Skipf("cannot mount a tmpfs with few inodes (needs root with CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) }) // after the sandboxes are gone
	p := newGroup(t, dir, "")
	hog, other := startOne(t, p), startOne(t, p)

	res := run(t, p, hog, `i=0; while [ $i -lt 39500 ]; do : > /tmp/f$i 2>/dev/null; i=$((i+1)); done; sleep 10; echo survived`)
	if strings.Contains(res.Stdout, "survived") || !strings.Contains(res.Stderr, "provider_config inodes_max") {
		t.Fatalf("a job making 39,500 files on a file system of 40,000 inodes was not stopped: %+v", res)
	}
	res = run(t, p, other, `mkdir /berth/w && i=0; while [ $i -lt 1000 ]; do : > /berth/w/f$i || exit 3; i=$((i+1)); done; echo made`)
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "made") {
		t.Fatalf("another tenant's job could not make 1,000 files: %+v", res)
	}
}
