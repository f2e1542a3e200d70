package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"golang.org/x/sys/unix"
)

// reapInBackground collects the exit of a sandbox process berth started,
// without an OS thread per sandbox.
//
// exec.Cmd.Wait (and os.Process.Wait) block in waitid(2), and a goroutine in
// a blocking system call holds an OS thread: with one waiter per sandbox,
// berth had a thread per running sandbox, and the Go runtime aborts the whole
// process at 10,000 threads. A pidfd instead becomes readable when its
// process exits, so the runtime's netpoller (one epoll for everything) can
// wait for it: the goroutine parks without a thread, and waitid(WNOHANG) on
// the pidfd then reaps the zombie at once.
//
// The command's own process handle is released: nothing may call cmd.Wait
// afterwards. The returned channel is closed once the process is reaped.
func reapInBackground(cmd *exec.Cmd) (<-chan struct{}, error) {
	// Our unreaped child cannot be replaced by another process under the
	// same PID, so opening a pidfd by PID is race-free here.
	fd, err := unix.PidfdOpen(cmd.Process.Pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", cmd.Process.Pid, err)
	}
	// os.NewFile registers a non-blocking descriptor with the netpoller.
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	cmd.Process.Release()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer f.Close()
		// Read calls reaped again each time the poller reports the pidfd
		// readable, and parks the goroutine while it returns false.
		_ = rc.Read(func(fd uintptr) bool { return reaped(int(fd)) })
	}()
	return done, nil
}

// reaped reaps the process behind pidfd if it has exited; it reports false
// while the process still runs.
func reaped(pidfd int) bool {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PIDFD, pidfd, &info, unix.WEXITED|unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			// ECHILD: someone else reaped it; nothing is left to wait for.
			return true
		}
		// With WNOHANG and the process still running, Linux leaves info
		// zeroed; a reaped child fills in SIGCHLD.
		return info.Signo != 0
	}
}
