// Package diskfull tells a full disk from other write failures, so that
// berth says "the disk holding DIR is full" instead of blaming what happened
// to be written first (a state file, a sandbox).
package diskfull

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// Explain returns an error saying that the disk holding dir is full (or the
// user's quota is used up), with how much room is left, when err is such a
// failure; otherwise nil.
func Explain(dir string, err error) error {
	// bbolt wraps some write errors with %s, losing the errno: look at the
	// text as well.
	quota := errors.Is(err, syscall.EDQUOT) || strings.Contains(err.Error(), syscall.EDQUOT.Error())
	if !quota && !errors.Is(err, syscall.ENOSPC) && !strings.Contains(err.Error(), syscall.ENOSPC.Error()) {
		return nil
	}
	what := "is full"
	if quota {
		what = "has no quota left for this user"
	}
	free := ""
	var st syscall.Statfs_t
	if syscall.Statfs(dir, &st) == nil {
		free = fmt.Sprintf(" (%d KiB free of %d KiB)", st.Bavail*uint64(st.Bsize)/1024, st.Blocks*uint64(st.Bsize)/1024)
	}
	return fmt.Errorf("the disk holding %s %s%s: %w; free space there (or pass another --state-dir) and start berth again; nothing was lost", dir, what, free, err)
}
