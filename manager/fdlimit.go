package manager

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"
)

// Every running job holds descriptors in berth (its SSH connection, its log
// file, its sandbox's pidfd with the local provider), so the open-file limit
// bounds how many jobs one berth can run. Berth raises its soft limit to the
// hard one at start, and /healthz turns degraded once descriptors come close
// to the limit: past it, accept and open fail with EMFILE and jobs fail in
// ways that say little about the cause.

// fdWarnFraction is the share of the open-file limit in use past which
// /healthz reports berth degraded.
const fdWarnFraction = 0.9

// raiseFileLimit sets the soft RLIMIT_NOFILE to the hard limit and logs
// both, so that the limit berth runs with is in its log. (The Go runtime
// raises it at start too; this makes it explicit and visible, and child
// processes still get the original soft limit from the runtime.)
func raiseFileLimit(log *slog.Logger) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open-file limit", "err", err)
		return
	}
	soft := lim.Cur
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			log.Warn("cannot raise the open-file limit to the hard limit; berth may run out of descriptors under load (raise LimitNOFILE= or ulimit -n)",
				"soft", soft, "hard", lim.Max, "err", err)
			return
		}
	}
	log.Info("open-file limit", "was", soft, "now", lim.Cur, "hard", lim.Max,
		"hint", "each running job holds 2-3 descriptors; raise the hard limit (LimitNOFILE=, ulimit -Hn) to run more")
}

// fdUsage counts this process's open descriptors against its soft limit.
// Counting walks /proc/self/fd, which costs a little with tens of thousands
// open, so one count serves every /healthz call for a second.
type fdUsage struct {
	mu      sync.Mutex
	at      time.Time
	open    int
	limit   uint64
	counted bool
}

// problem returns what /healthz should say about descriptors, or "".
func (u *fdUsage) problem() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.counted || time.Since(u.at) > time.Second {
		u.count()
	}
	return fdProblem(u.open, u.limit)
}

func (u *fdUsage) count() {
	u.at, u.counted = time.Now(), true
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) != nil {
		u.limit = 0
		return
	}
	u.limit = lim.Cur
	f, err := os.Open("/proc/self/fd")
	if err != nil {
		u.limit = 0 // not Linux, or no /proc: nothing to say
		return
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	u.open = len(names) - 1 // the directory's own descriptor
}

// fdProblem says whether open descriptors are close to limit.
func fdProblem(open int, limit uint64) string {
	if limit == 0 || limit == ^uint64(0) || float64(open) <= fdWarnFraction*float64(limit) {
		return ""
	}
	return fmt.Sprintf("%d of %d open files in use (over %.0f%%): new jobs and API connections will fail with \"too many open files\" at the limit; raise berth's hard open-file limit (LimitNOFILE= in its systemd unit, ulimit -Hn) or lower max_instances × capacity_per_instance",
		open, limit, fdWarnFraction*100)
}
