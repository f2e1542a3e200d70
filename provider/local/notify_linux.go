package local

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/provider"
)

// readyWatcher tells the function registered with Notify the moment a
// sandbox starts serving SSH. The sandbox writes its ready file once its SSH
// listener is set up; an inotify watch on the instance directory sees that
// write within microseconds, where a caller polling Update would see it only
// at its next listing. Like Update, it counts only a non-empty ready file.
//
// Watches are per instance directory (inotify is not recursive, so a job
// writing to its disk/ makes no events). A directory is watched from just
// before its sandbox starts until it is ready, so no ready file is missed.
type readyWatcher struct {
	file *os.File // the inotify descriptor, non-blocking, so Close ends run
	log  *slog.Logger

	mu  sync.Mutex
	ids map[int32]watched // by watch descriptor

	// fnMu guards fn and is held while fn runs; it is not mu, so that
	// starting sandboxes (watch) does not wait for the listener (the
	// fleet's fn takes the fleet's lock, which a burst keeps busy).
	fnMu sync.Mutex
	fn   func(id string, s provider.State)
}

// watched is an instance directory being watched.
type watched struct{ id, dir string }

func newReadyWatcher(log *slog.Logger) (*readyWatcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	return &readyWatcher{file: os.NewFile(uintptr(fd), "inotify"), log: log, ids: map[int32]watched{}}, nil
}

func (w *readyWatcher) setFn(fn func(id string, s provider.State)) {
	w.fnMu.Lock()
	w.fn = fn
	w.fnMu.Unlock()
}

// watch starts watching instance id's directory for its ready file.
func (w *readyWatcher) watch(id, dir string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	var wd int
	err := w.withFD(func(fd int) (err error) {
		// The write of the ready file is the moment; its close may come
		// later when another process shares the open file.
		wd, err = unix.InotifyAddWatch(fd, dir, unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_ONLYDIR)
		return err
	})
	if err != nil {
		// Not fatal: the next listing still finds the instance running.
		w.log.Warn("cannot watch instance for readiness; berth learns it at its next listing", "id", id, "err", err)
		return false
	}
	w.ids[int32(wd)] = watched{id, dir}
	return true
}

// unwatch stops watching instance id.
func (w *readyWatcher) unwatch(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wd, got := range w.ids {
		if got.id == id {
			delete(w.ids, wd)
			_ = w.withFD(func(fd int) error { _, err := unix.InotifyRmWatch(fd, uint32(wd)); return err })
		}
	}
}

// withFD runs fn with the raw inotify descriptor, unless it is closed.
func (w *readyWatcher) withFD(fn func(fd int) error) error {
	rc, err := w.file.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// emit calls the registered function, if any. It holds fnMu while fn
// runs, so that once setFn returned the function it replaced is not called
// any more (fn does not call the provider).
func (w *readyWatcher) emit(id string, s provider.State) {
	w.fnMu.Lock()
	defer w.fnMu.Unlock()
	if w.fn != nil {
		w.fn(id, s)
	}
}

// run reads events until the watcher is closed.
func (w *readyWatcher) run() {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			if !errors.Is(err, os.ErrClosed) {
				w.log.Warn("instance readiness watcher stopped; berth learns readiness from its listings", "err", err)
			}
			return
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			w.handle(ev.Wd, ev.Mask, string(bytes.TrimRight(name, "\x00")))
		}
	}
}

func (w *readyWatcher) handle(wd int32, mask uint32, name string) {
	w.mu.Lock()
	got, ok := w.ids[wd]
	switch {
	case !ok:
		w.mu.Unlock()
		return
	case mask&unix.IN_IGNORED != 0: // the directory is gone
		delete(w.ids, wd)
		w.mu.Unlock()
		return
	case mask&(unix.IN_MODIFY|unix.IN_CLOSE_WRITE) == 0 || name != readyFile || !readyNow(got.dir):
		// An empty ready file closed is not readiness: whoever prepared
		// it for the sandbox closed their copy, or the sandbox died.
		w.mu.Unlock()
		return
	}
	// Ready: the watch has done its job. A later resume watches again.
	delete(w.ids, wd)
	_ = w.withFD(func(fd int) error { _, err := unix.InotifyRmWatch(fd, uint32(wd)); return err })
	w.mu.Unlock()
	w.emit(got.id, provider.StateRunning)
}

func (w *readyWatcher) close() error { return w.file.Close() }

// Notify registers fn to hear of every instance that starts serving SSH
// (after Increase, or after Resume); see provider.Notifier. The first call
// with a non-nil fn starts an inotify watcher; if the kernel refuses one,
// Notify logs why and the caller learns readiness from Update as before.
func (p *Provider) Notify(fn func(id string, s provider.State)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watcher == nil {
		if fn == nil {
			return
		}
		w, err := newReadyWatcher(p.log)
		if err != nil {
			p.log.Warn("cannot watch instances for readiness; berth learns it at its next listing", "err", err)
			return
		}
		p.watcher = w
		go w.run()
		p.watcher.setFn(fn)
		p.watchBooting(w)
		return
	}
	p.watcher.setFn(fn)
}

// watchBooting watches the instances that are booting before anyone
// listened, such as those a previous berth process started just before it
// stopped, so that they are reported too.
func (p *Provider) watchBooting(w *readyWatcher) {
	entries, _ := os.ReadDir(filepath.Join(p.dir, "instances"))
	for _, e := range entries {
		id, dir := e.Name(), p.instDir(e.Name())
		if checkID(id) != nil {
			continue
		}
		if m, err := readMeta(dir); err != nil || m.State != wantRunning || readyNow(dir) {
			continue
		}
		// The sandbox may have become ready just before the watch began.
		if w.watch(id, dir) && readyNow(dir) {
			w.unwatch(id)
			w.emit(id, provider.StateRunning)
		}
	}
}

// readyNow reports whether the sandbox in dir has written its ready file.
func readyNow(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, readyFile))
	return err == nil && fi.Size() > 0
}

// watchReady watches instance id for readiness if anyone listens. Called
// before its sandbox starts, so the ready file cannot be missed.
func (p *Provider) watchReady(id string) {
	p.mu.Lock()
	w := p.watcher
	p.mu.Unlock()
	if w != nil {
		w.watch(id, p.instDir(id))
	}
}

// notify tells the listener, if any, that instance id is now in state s.
func (p *Provider) notify(id string, s provider.State) {
	p.mu.Lock()
	w := p.watcher
	p.mu.Unlock()
	if w != nil {
		w.emit(id, s)
	}
}

// canNotify reports whether this kernel lets the provider watch files, for
// Info.Capabilities.Notify.
func canNotify() bool {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

var _ provider.Notifier = (*Provider)(nil)
