//go:build linux

package security_test

import "testing"

// TestResetLeavesNoAttributes has one job put a user extended attribute
// and a default POSIX ACL (which new files inherit) on every directory a
// job may write, and checks that the next job on the instance finds none,
// and that /tmp and /dev/shm are sticky before and after the reset.
func TestResetLeavesNoAttributes(t *testing.T) {
	f := newFixture(t, "")
	const modes = "stat -c '%n %A' /tmp /dev/shm"
	const sticky = "/tmp drwxrwxrwt\n/dev/shm drwxrwxrwt\n"
	if code, out := f.job(f.a, modes); code != 0 || out != sticky {
		t.Errorf("a fresh sandbox's /tmp and /dev/shm are not sticky: exit %d\n got %q\nwant %q", code, out, sticky)
	}
	if code, out := f.job(f.a, "/berth/attack taint /berth /tmp /dev/shm"); code != 0 {
		t.Fatalf("first job could not set the attributes: exit %d %s", code, out)
	}
	f.recycle(f.a)
	code, out := f.job(f.a, "/berth/attack xattrs /berth /tmp /dev/shm; touch /tmp/new /berth/new && /berth/attack xattrs /tmp/new /berth/new; "+modes)
	want := "/berth: \n/tmp: \n/dev/shm: \n/tmp/new: \n/berth/new: \n" + sticky
	if code != 0 || out != want {
		t.Errorf("the next job found the last one's attributes or lost the sticky bit: exit %d\n got %q\nwant %q", code, out, want)
	}
}
