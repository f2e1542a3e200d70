package local

import (
	"fmt"
	"runtime"
	"sync"
)

// jobThread is the one thread of PID 1 that starts processes. It carries
// the sandbox's seccomp filter and no_new_privs, both per thread in the
// kernel, so every job and command PID 1 starts inherits them exactly as
// if PID 1 as a whole were filtered, while PID 1's other threads stay free
// to start the image launcher later, which needs the mount calls the
// filter denies (jobroot_linux.go). Starting the launcher lazily, only for
// a sandbox's first image job, saves every sandbox without one a Go
// program's start-up and its threads (issue 23).
//
// Go makes the threads a locked thread asks for through its template
// thread, which LockOSThread starts before the lock (runtime.newm and
// LockOSThread in runtime/proc.go), so the filter stays on this thread
// alone and no other thread of PID 1 gets it by being cloned from this one.
type jobThread struct {
	reqs chan func()
	// listener is the filter's seccomp listener, for mountNotes; -1
	// when there is none (image_builds, or a kernel without one).
	listener int
}

// newJobThread starts the job thread's thread and loads the filter on it;
// builds is provider_config image_builds. Without it mount calls go to
// the filter's listener (mountsNoted) where the kernel offers one.
func newJobThread(builds bool) (*jobThread, error) {
	s := &jobThread{reqs: make(chan func()), listener: -1}
	loaded := make(chan error, 1)
	go func() {
		// Never unlocked: the thread carries the filter, and ends with
		// the process.
		runtime.LockOSThread()
		var err error
		if builds {
			_, err = loadSeccomp(false, mountsForBuilds)
		} else if s.listener, err = loadSeccomp(false, mountsNoted); err != nil {
			s.listener, err = loadSeccomp(false, mountsRefused)
		}
		loaded <- err
		if err != nil {
			return // the thread ends with the locked goroutine
		}
		for f := range s.reqs {
			f()
		}
	}()
	if err := <-loaded; err != nil {
		return nil, err
	}
	return s, nil
}

// do runs f on the job thread and returns when it is done.
func (s *jobThread) do(f func()) {
	done := make(chan struct{})
	s.reqs <- func() {
		defer close(done)
		f()
	}
	<-done
}

// seal applies the filter to every thread of PID 1 (TSYNC). It must run on
// the job thread: the kernel synchronises only threads whose filters
// are ancestors of the caller's, and the other threads have none. The
// filter it adds allows everything, so the threads end up with the
// sandbox's filter below one that changes nothing.
func (s *jobThread) seal() error {
	var err error
	s.do(func() { err = sealSeccomp() })
	if err != nil {
		return fmt.Errorf("apply the seccomp filter to PID 1's own threads: %w", err)
	}
	return nil
}

// spareThreads makes the Go runtime start n more threads now and keep them
// idle, for later. A job can fill the sandbox's pids limit (a fork bomb),
// after which the kernel refuses PID 1 a new thread, and a Go runtime that
// cannot start a thread it needs aborts: the sandbox would die with its
// job. With GOMAXPROCS=1 the runtime starts few threads at boot and so
// needs new ones later, under the bomb (TestPidsLimit failed one run in
// four). Each goroutine below holds a thread of its own until all have
// one; the runtime keeps idle threads for reuse and never ends them.
func spareThreads(n int) {
	var ready, release sync.WaitGroup
	ready.Add(n)
	release.Add(1)
	for range n {
		go func() {
			runtime.LockOSThread()
			ready.Done()
			release.Wait()
			runtime.UnlockOSThread()
		}()
	}
	ready.Wait()
	release.Done()
}
