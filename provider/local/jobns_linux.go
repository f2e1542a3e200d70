package local

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/jobroot"
)

// jobNS says how the sandbox starts commands: each in a user namespace
// nested in the sandbox's, mapping the same IDs one to one, with its own
// mount, UTS and IPC namespaces.
//
// The nested user namespace is what locks the sandbox's mounts: the kernel
// marks every mount copied into a mount namespace owned by a less
// privileged user namespace as locked, so a command, although root in its
// namespace, can neither unmount, remount read-write nor move anything the
// sandbox set up (the seccomp filter denies the mount calls as well). It
// also keeps commands from holding any capability in the sandbox's own user
// namespace, so they cannot read PID 1's memory or descriptors. The UTS and
// IPC namespaces keep a job's hostname change and System V IPC objects from
// outliving it.
type jobNS struct {
	uidMap, gidMap []syscall.SysProcIDMap
	setgroups      bool
}

// newJobNS reads the sandbox's own ID maps; call it after /proc is the
// sandbox's.
func newJobNS() (jobNS, error) {
	var j jobNS
	var err error
	if j.uidMap, err = jobroot.IdentityMap("/proc/self/uid_map"); err != nil {
		return j, err
	}
	if j.gidMap, err = jobroot.IdentityMap("/proc/self/gid_map"); err != nil {
		return j, err
	}
	b, err := os.ReadFile("/proc/self/setgroups")
	if err != nil {
		return j, err
	}
	j.setgroups = strings.TrimSpace(string(b)) == "allow"
	return j, nil
}

func (j jobNS) sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setpgid:                    true,
		Cloneflags:                 unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC,
		UidMappings:                j.uidMap,
		GidMappings:                j.gidMap,
		GidMappingsEnableSetgroups: j.setgroups,
	}
}

// recycleRequest is the global SSH request with which the provider resets
// a sandbox between two jobs.
const recycleRequest = "recycle@berth-ci.dev"

// wiped are the directories a job may write to; recycling empties them.
var wiped = []struct {
	dir  string
	mode os.FileMode
}{{"/tmp", os.ModeSticky | 0o777}, {"/dev/shm", os.ModeSticky | 0o777}, {"/berth", 0o755}}

// recycle makes the sandbox as it was after boot: every process but PID 1
// is killed (kill(-1) from PID 1 reaches the whole PID namespace, nested
// ones included), /tmp, /dev/shm and /berth are emptied and get back their
// owner and mode, and the hostname is the instance ID again.
func recycle(hostname string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := killJobs(); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("kill job processes: %w", err)
		}
		n, err := otherProcesses()
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes still exist 10s after SIGKILL", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
	var errs []error
	for _, w := range wiped {
		if err := wipeDir(w.dir); err != nil {
			errs = append(errs, fmt.Errorf("wipe %s: %w", w.dir, err))
		}
		if err := os.Lchown(w.dir, 0, 0); err != nil {
			errs = append(errs, err)
		}
		if err := os.Chmod(w.dir, w.mode); err != nil {
			errs = append(errs, err)
		}
	}
	if err := unix.Sethostname([]byte(hostname)); err != nil {
		errs = append(errs, fmt.Errorf("reset hostname: %w", err))
	}
	return errors.Join(errs...)
}

// otherProcesses counts the processes of the PID namespace other than PID 1,
// zombies included (the reaper collects those).
func otherProcesses() (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if name == "1" || name == "" || name[0] < '0' || name[0] > '9' || isLauncher(name) {
			continue
		}
		n++
	}
	return n, nil
}
