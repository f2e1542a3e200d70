package local

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mountNote is what a job's log gets the first time the job calls
// mount(2) without provider_config image_builds: container builds fail
// there with the kernel's bare "operation not permitted" (buildah:
// "remount /, flags: 0x44000"), which says nothing of the setting.
const mountNote = "berth: mount(2) refused: this local instance denies jobs every mount. " +
	"A container build with RUN steps (buildah bud --isolation chroot) needs the operator to set " +
	"image_builds = true in [autoscaler.provider_config] (docs/images.md, \"Building images in jobs\"); " +
	"builds without RUN steps work without it.\n"

// mountNotes answers the sandbox filter's mount notifications
// (mountsNoted): each call fails with EPERM, as the filter would have
// failed it, and the session whose command the caller descends from gets
// mountNote on its stderr, once. The answer never depends on the call's
// arguments, so the notifications' known race (the caller's memory can
// change under the supervisor) does not matter.
type mountNotes struct {
	listener int
	log      *slog.Logger

	mu       sync.Mutex
	sessions map[int]*noteTarget // by the PID of the session's command
}

// noteTarget is one session's stderr and whether it was told.
type noteTarget struct {
	stderr io.Writer
	told   bool
}

// add registers the command pid of a session, whose stderr is w.
func (n *mountNotes) add(pid int, w io.Writer) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sessions == nil {
		n.sessions = map[int]*noteTarget{}
	}
	n.sessions[pid] = &noteTarget{stderr: w}
}

// remove forgets the session of command pid.
func (n *mountNotes) remove(pid int) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.sessions, pid)
}

// seccompNotif and seccompNotifResp are the kernel's struct seccomp_notif
// and struct seccomp_notif_resp (linux/seccomp.h).
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	data  [64]byte // struct seccomp_data
}

type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// serve answers notifications until the listener fails; it runs for the
// sandbox's life.
func (n *mountNotes) serve() {
	for {
		var req seccompNotif
		if err := ioctlPtr(n.listener, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&req)); err != nil {
			if errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOENT) {
				continue // a signal, or the caller died before we read it
			}
			// Closed, the listener fails every pending and later
			// mount call (ENOSYS) instead of leaving it waiting.
			unix.Close(n.listener)
			n.log.Error("mount notifications stopped; jobs' mount calls now fail without a note", "err", err)
			return
		}
		// Told before the call returns, so that the note is in the log
		// before a job that exits at once is over.
		n.tell(int(req.pid))
		resp := seccompNotifResp{id: req.id, error: -int32(unix.EPERM)}
		// ENOENT: the caller died meanwhile; nothing to answer.
		ioctlPtr(n.listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
	}
}

// tell writes mountNote to the session pid descends from, unless it was
// told already. Processes that left their session's tree (reparented to
// PID 1) go untold.
func (n *mountNotes) tell(pid int) {
	for range 64 { // deeper trees are not worth the walk
		n.mu.Lock()
		t := n.sessions[pid]
		first := t != nil && !t.told
		if first {
			t.told = true
		}
		n.mu.Unlock()
		if t != nil {
			if first {
				written := make(chan struct{})
				go func() { t.stderr.Write([]byte(mountNote)); close(written) }()
				// A client that does not read must not stall the answers
				// for long.
				select {
				case <-written:
				case <-time.After(time.Second):
				}
			}
			return
		}
		ppid, err := parentPID(pid)
		if err != nil || ppid <= 1 {
			return
		}
		pid = ppid
	}
}

// parentPID reads the parent of pid from /proc/PID/stat.
func parentPID(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	return strconv.Atoi(f[1])
}

func ioctlPtr(fd int, req uint, p unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(p))
	if errno != 0 {
		return errno
	}
	return nil
}
