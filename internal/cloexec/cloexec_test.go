//go:build linux

package cloexec

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A descriptor inherited without close-on-exec does not reach a child
// started afterwards.
func TestInheritedDescriptorsDoNotReachChildren(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	// As if inherited: clear close-on-exec on the pipe's write end.
	if _, _, errno := syscall.Syscall(syscall.SYS_FCNTL, w.Fd(), syscall.F_SETFD, 0); errno != 0 {
		t.Fatal(errno)
	}
	fd := strconv.Itoa(int(w.Fd()))
	open := func() bool {
		out, err := exec.Command("sh", "-c", "test -e /proc/self/fd/"+fd+" && echo open || echo closed").Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out)) == "open"
	}
	if !open() {
		t.Fatal("the test's own setup: the child did not inherit the pipe")
	}
	if err := Inherited(); err != nil {
		t.Fatal(err)
	}
	if open() {
		t.Errorf("fd %s still reaches a child after Inherited", fd)
	}
}
