package local

import (
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"
)

// keepImageJobsDir keeps a descriptor of the instance's image cache (fd
// imagesFD, which the launcher takes over later) for PID 1's disk watch and
// returns the path of its jobs directory through it: the writable layers
// (overlay upper dirs) of image jobs and their services live there, on the
// state dir's file system, and count against disk_max like /berth and /tmp.
// The launcher mounts the cache only in its own namespace; the descriptor
// is close-on-exec and PID 1 is not dumpable, so jobs still cannot reach it.
// "" when the sandbox has no image cache.
func keepImageJobsDir(log *slog.Logger) string {
	fd, err := unix.FcntlInt(imagesFD, unix.F_DUPFD_CLOEXEC, imagesFD+1)
	if err != nil {
		log.Warn("no image cache descriptor: image jobs' writable layers are not counted against disk_max", "err", err)
		return ""
	}
	return fmt.Sprintf("/proc/self/fd/%d/jobs", fd)
}

// watchedDirs are the directories counted against disk_max.
func watchedDirs(imageJobs string) []string {
	if imageJobs == "" {
		return diskDirs
	}
	return append(append([]string(nil), diskDirs...), imageJobs)
}
