// Package cloexec marks the descriptors a process inherited close-on-exec,
// so that none reaches a child by accident.
package cloexec

import (
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Inherited marks every descriptor from 3 up close-on-exec. A descriptor
// some ancestor left open without close-on-exec (a supervisor's or a test
// runner's pipe: `go test` leaves one at fd 251) would otherwise pass
// through every exec to every process started later: provider plugins,
// sandboxes, jobs. Go opens its own descriptors close-on-exec, and children
// get descriptors only when passed explicitly (os.ProcAttr.Files), which
// this does not stop.
func Inherited() error {
	err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	// Before Linux 5.11: one by one, as /proc lists them.
	entries, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return err
	}
	for _, e := range entries {
		if fd, perr := strconv.Atoi(e.Name()); perr == nil && fd >= 3 {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}
