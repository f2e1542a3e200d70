package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"

	"golang.org/x/sys/unix"
)

// reapInBackground collects the exit of a sandbox process berth started,
// without an OS thread, or even a goroutine, per sandbox.
//
// exec.Cmd.Wait (and os.Process.Wait) block in waitid(2), and a goroutine in
// a blocking system call holds an OS thread: with one waiter per sandbox,
// berth had a thread per running sandbox, and the Go runtime aborts the whole
// process at 10,000 threads. A pidfd instead becomes readable when its
// process exits. Every pidfd goes into one epoll set, whose own descriptor
// the runtime's netpoller watches; one goroutine then reaps the processes
// whose pidfds are readable with waitid(WNOHANG). (A goroutine per pidfd
// parked in the netpoller worked too, but cost its stack per sandbox.)
//
// The command's own process handle is released: nothing may call cmd.Wait
// afterwards. The returned channel is closed once the process is reaped.
func reapInBackground(cmd *exec.Cmd) (<-chan struct{}, error) {
	r, err := sharedReaper()
	if err != nil {
		return nil, err
	}
	// Our unreaped child cannot be replaced by another process under the
	// same PID, so opening a pidfd by PID is race-free here.
	fd, err := unix.PidfdOpen(cmd.Process.Pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", cmd.Process.Pid, err)
	}
	done, err := watchPidfd(r, fd)
	if err != nil {
		return nil, err
	}
	cmd.Process.Release()
	return done, nil
}

// reapPidfd is reapInBackground for a process berth holds a pidfd of but
// did not start itself (the spawner's sandboxes): its parent reaps it, and
// the pidfd becomes readable when it exits all the same. reapPidfd takes
// over fd.
func reapPidfd(fd int) (<-chan struct{}, error) {
	r, err := sharedReaper()
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return watchPidfd(r, fd)
}

// watchPidfd adds fd to r's epoll set; on failure fd is closed.
func watchPidfd(r *pidfdReaper, fd int) (<-chan struct{}, error) {
	done := make(chan struct{})
	r.mu.Lock()
	r.waiting[int32(fd)] = done
	r.mu.Unlock()
	// Level-triggered: a process that exited before this is still seen.
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(r.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		r.mu.Lock()
		delete(r.waiting, int32(fd))
		r.mu.Unlock()
		unix.Close(fd)
		return nil, fmt.Errorf("epoll_ctl: %w", err)
	}
	return done, nil
}

// pidfdReaper is the epoll set of the pidfds of processes waited for.
type pidfdReaper struct {
	ep      int      // the epoll descriptor
	file    *os.File // ep, registered with the netpoller
	mu      sync.Mutex
	waiting map[int32]chan struct{} // by pidfd
}

var (
	reaperOnce sync.Once
	theReaper  *pidfdReaper
	reaperErr  error
)

// sharedReaper returns the process's reaper, starting it on first use.
func sharedReaper() (*pidfdReaper, error) {
	reaperOnce.Do(func() {
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			reaperErr = fmt.Errorf("epoll_create1: %w", err)
			return
		}
		if err := unix.SetNonblock(ep, true); err != nil {
			unix.Close(ep)
			reaperErr = err
			return
		}
		// os.NewFile registers a non-blocking descriptor with the
		// netpoller; an epoll descriptor is readable while any of its
		// descriptors is ready.
		r := &pidfdReaper{ep: ep, file: os.NewFile(uintptr(ep), "pidfd-epoll"), waiting: map[int32]chan struct{}{}}
		rc, err := r.file.SyscallConn()
		if err != nil {
			r.file.Close()
			reaperErr = err
			return
		}
		theReaper = r
		go func() {
			// Read parks the goroutine until the epoll descriptor is
			// readable, then calls reapReady again; it never returns true.
			_ = rc.Read(func(uintptr) bool { r.reapReady(); return false })
		}()
	})
	return theReaper, reaperErr
}

// reapReady reaps every process whose pidfd is readable.
func (r *pidfdReaper) reapReady() {
	events := make([]unix.EpollEvent, 64)
	for {
		n, err := unix.EpollWait(r.ep, events, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			if !reaped(int(ev.Fd)) {
				continue // spurious: still running
			}
			// Out of the map before the descriptor is closed and its
			// number can be reused by the next pidfd.
			r.mu.Lock()
			done := r.waiting[ev.Fd]
			delete(r.waiting, ev.Fd)
			r.mu.Unlock()
			unix.EpollCtl(r.ep, unix.EPOLL_CTL_DEL, int(ev.Fd), nil)
			unix.Close(int(ev.Fd))
			if done != nil {
				close(done)
			}
		}
		if n < len(events) {
			return
		}
	}
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
