package local

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// userQuotas are the per-user kernel object limits (/proc/sys/user/max_*)
// PID 1 sets in the sandbox's user namespace. A new user namespace starts
// with no limit of its own, and every object a job makes is also charged
// to the user berth runs as on the host, whose limits all sandboxes share:
// without these, one job could take all of them (every user namespace or
// inotify instance berth's user may have) and break every other sandbox
// and berth itself. The kernel charges each namespace level, so a job's own
// nested namespaces cannot lift them.
//
// Every job session runs in one nested user and mount namespace of its own
// (see jobNS), and a job may make a few more (a rootless build, an image
// runner's per-job namespace): namespaceQuota leaves room for that for
// every job that may run at once, and no more.
var userQuotas = map[string]int{
	"max_inotify_instances": 16,
	"max_inotify_watches":   65536,
	"max_fanotify_groups":   16,
	"max_fanotify_marks":    8192,
}

// namespaceKinds are the namespace quotas namespaceQuota sizes.
var namespaceKinds = []string{"user", "mnt", "pid", "uts", "ipc",
	"net", // creating one is refused by seccomp anyway
	"cgroup", "time"}

// namespaceQuota is the limit of each namespace kind for an instance that
// runs slots jobs at once: 8 per job (a session's own, an image job's and
// its services', a rootless build's) and never under 64. With 100 slots a
// quota of 64 made sessions fail with ENOSPC.
func namespaceQuota(slots int) int { return max(64, 8*slots) }

// setUserQuotas writes userQuotas and the namespace quotas for slots jobs
// into the calling process's user namespace, never above the value already
// there (the host's, inherited as the effective ceiling), through dir, the
// sys/user directory of a procfs. Names this kernel does not have are
// skipped.
//
// The sandbox passes its own, new procfs: looking names up under the
// host's /proc/sys compared them against the same entries of every other
// live sandbox, a cost that grew with the number of sandboxes (3.8 ms of a
// sandbox's CPU with 1,000 up, in perf; 2.7 ms less measured through its
// own). Each file is opened once, relative to the directory, for the same
// reason.
func setUserQuotas(dir string, slots int) error {
	quotas := make(map[string]int, len(userQuotas)+len(namespaceKinds))
	for name, n := range userQuotas {
		quotas[name] = n
	}
	for _, kind := range namespaceKinds {
		quotas["max_"+kind+"_namespaces"] = namespaceQuota(slots)
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	for name, want := range quotas {
		if err := lowerQuota(dfd, dir+"/"+name, name, want); err != nil {
			return err
		}
	}
	return nil
}

// lowerQuota sets the sysctl file name in directory dfd to want when it
// holds more; a missing file is skipped.
func lowerQuota(dfd int, path, name string, want int) error {
	fd, err := unix.Openat(dfd, name, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err == unix.EACCES || err == unix.EPERM || err == unix.EROFS {
		// Not writable here: fine as long as it need not be lowered.
		fd, err = unix.Openat(dfd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	}
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	var buf [32]byte
	n, err := unix.Read(fd, buf[:])
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(buf[:max(n, 0)])))
	if err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	if cur <= want {
		return nil
	}
	if _, err := unix.Pwrite(fd, []byte(strconv.Itoa(want)), 0); err != nil {
		return fmt.Errorf("limit %s to %d: %w", path, want, err)
	}
	return nil
}

// limitProcs sets RLIMIT_NPROC (soft and hard) to n when n > 0. The kernel
// counts a user's tasks per user namespace and checks every level against
// the limit its creator had, so the job namespaces PID 1 creates from now
// on are held to n tasks together, PID 1's own threads included: a fork
// bomb fails with EAGAIN. At worst it starves PID 1 of threads, which ends
// the job's own sandbox and nobody else's.
func limitProcs(n int) error {
	if n <= 0 {
		return nil
	}
	l := unix.Rlimit{Cur: uint64(n), Max: uint64(n)}
	if err := unix.Setrlimit(unix.RLIMIT_NPROC, &l); err != nil {
		return fmt.Errorf("set RLIMIT_NPROC to %d: %w", n, err)
	}
	return nil
}
