package local

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/internal/bytesize"
)

// diskDirs are the sandbox directories that live on the host's disk (the
// state dir's file system) and count against disk_max. /dev/shm is a
// size-limited tmpfs of its own.
var diskDirs = []string{"/berth", "/tmp"}

// defaultDiskShare is the share of the state dir's file system one instance
// may fill when disk_max is not set.
const defaultDiskShare = 4 // a quarter

// parseSize reads "512M", "20G", "1T" or a plain number of bytes (binary
// units).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	mult := int64(1)
	for i, u := range []string{"K", "M", "G", "T"} {
		if strings.HasSuffix(t, u) || strings.HasSuffix(t, u+"B") || strings.HasSuffix(t, u+"IB") {
			t = strings.TrimRight(strings.TrimSuffix(t, "IB"), "KMGTB")
			mult = 1 << (10 * (i + 1))
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size such as 20G, 512M or a number of bytes", s)
	}
	return n * mult, nil
}

// defaultDiskMax is a quarter of the size of the file system holding dir.
func defaultDiskMax(dir string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0
	}
	return int64(st.Blocks) * st.Bsize / defaultDiskShare
}

// diskUsage sums the space allocated to the files under dirs and counts
// their inodes (directories included), counting a file with several links
// once.
func diskUsage(dirs []string) (bytes, inodes int64) {
	type ino struct{ dev, ino uint64 }
	seen := map[ino]bool{}
	for _, d := range dirs {
		filepath.WalkDir(d, func(_ string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil // vanished or unreadable: skip, keep counting
			}
			fi, err := e.Info()
			if err != nil {
				return nil
			}
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return nil
			}
			if st.Nlink > 1 && !e.IsDir() {
				k := ino{st.Dev, st.Ino}
				if seen[k] {
					return nil
				}
				seen[k] = true
			}
			bytes += st.Blocks * 512
			inodes++
			return nil
		})
	}
	return bytes, inodes
}

// diskWatch enforces disk_max and inodes_max inside the sandbox. Walking
// the directories costs time, so it walks every few seconds, and sooner
// when the file system's free space (or free inodes) fell by more than the
// room left under the limit: a job that writes fast is caught within a
// fraction of a second of crossing the limit. Berth's diskPoller watches
// the free space for all sandboxes at once (host, one statfs every 100 ms
// in berth); without it (no socket given, or berth gone) the sandbox does
// a statfs every 100 ms itself, which costs a timer wake-up each.
//
// Inodes are watched like bytes because a file system runs out of either:
// a job making tens of thousands of empty files took every inode of the
// state dir's file system with bytes free, and another tenant's job failed
// (issue 43).
type diskWatch struct {
	limit int64
	// reserve is the free space of the file system no job eats into: a
	// walk that finds less free while the usage grew ends the job.
	reserve int64
	// inodeLimit and inodeReserve are limit and reserve counted in
	// inodes; 0 means none.
	inodeLimit, inodeReserve int64
	dirs                     []string
	log                      *slog.Logger
	// over is called with the usage and the message for the job when it
	// exceeds the limit or writes into the reserve; it ends the job and
	// empties the directories.
	over func(used int64, msg string)
	// host is this sandbox's end of berth's diskPoller socket; nil when
	// the sandbox polls the free space itself.
	host *os.File
	// minEvery is the shortest time between two periodic walks (tests
	// make it long, to see the free-space trigger alone at work).
	minEvery time.Duration

	used, prevUsed usage
	freeAtWalk     usage // -1 where unknown
	every          time.Duration
	lastWalk       time.Time
}

// usage is an amount of a file system: bytes and inodes.
type usage struct{ bytes, inodes int64 }

func (w *diskWatch) run() {
	if w.minEvery == 0 {
		w.minEvery = 2 * time.Second
	}
	if w.inodeLimit <= 0 {
		w.inodeLimit = math.MaxInt64 / 2
	}
	w.freeAtWalk, w.every = usage{-1, -1}, w.minEvery
	if w.host != nil {
		w.hostPaced()
		w.log.Info("berth's disk poller is gone; the sandbox watches the free space itself")
	}
	w.selfPaced()
}

// walk measures the directories and ends the job when they are over a
// limit or it grew into a reserve.
func (w *diskWatch) walk() {
	start := time.Now()
	w.used.bytes, w.used.inodes = diskUsage(w.dirs)
	took := time.Since(start)
	w.lastWalk, w.freeAtWalk = time.Now(), freeSpace(w.dirs[0])
	// Walking a large tree must not become the sandbox's main work.
	w.every = max(w.minEvery, 20*took)
	grew := w.used.bytes > w.prevUsed.bytes
	grewInodes := w.used.inodes > w.prevUsed.inodes
	w.prevUsed = w.used
	used, free := w.used, w.freeAtWalk
	switch {
	case used.bytes > w.limit:
		w.log.Warn("job over disk_max: killing it and emptying its directories", "used", used.bytes, "disk_max", w.limit, "walk_took", took.String())
		w.over(used.bytes, diskMaxMessage(used.bytes, w.limit))
	case used.inodes > w.inodeLimit:
		w.log.Warn("job over inodes_max: killing it and emptying its directories", "inodes", used.inodes, "inodes_max", w.inodeLimit, "walk_took", took.String())
		w.over(used.bytes, inodesMaxMessage(used.inodes, w.inodeLimit))
	case w.reserve > 0 && free.bytes >= 0 && free.bytes < w.reserve && grew:
		w.log.Warn("job writing into the disk reserve: killing it and emptying its directories", "used", used.bytes, "free", free.bytes, "disk_reserve", w.reserve)
		w.over(used.bytes, diskReserveMessage(free.bytes, w.reserve))
	case w.inodeReserve > 0 && free.inodes >= 0 && free.inodes < w.inodeReserve && grewInodes:
		w.log.Warn("job making files in the inode reserve: killing it and emptying its directories", "inodes", used.inodes, "free_inodes", free.inodes, "inodes_reserve", w.inodeReserve)
		w.over(used.bytes, inodesReserveMessage(free.inodes, w.inodeReserve))
	default:
		return
	}
	w.used, w.freeAtWalk, w.prevUsed = usage{}, usage{-1, -1}, usage{}
}

// room is how far the free space (and free inodes) may fall before a walk
// must look: the room left under the limit, or above the reserve if that
// is less.
func (w *diskWatch) room(free usage) usage {
	r := usage{w.limit - w.used.bytes, w.inodeLimit - w.used.inodes}
	if w.reserve > 0 && free.bytes >= 0 {
		r.bytes = min(r.bytes, max(free.bytes-w.reserve, 0))
	}
	if w.inodeReserve > 0 && free.inodes >= 0 {
		r.inodes = min(r.inodes, max(free.inodes-w.inodeReserve, 0))
	}
	return r
}

// fell says whether free fell from the last walk's by more than the room
// left then, in bytes or in inodes.
func (w *diskWatch) fell(free usage) bool {
	at, r := w.freeAtWalk, w.room(w.freeAtWalk)
	return (at.bytes >= 0 && free.bytes >= 0 && at.bytes-free.bytes > r.bytes) ||
		(at.inodes >= 0 && free.inodes >= 0 && at.inodes-free.inodes > r.inodes)
}

// hostPaced walks after every request of berth's poller and every
// w.every, and reports each walk. It returns when berth is gone.
func (w *diskWatch) hostPaced() {
	var msg [64]byte
	for {
		w.walk()
		report := encodeDiskReport(w.freeAtWalk, w.room(w.freeAtWalk))
		if _, err := w.host.Write(report[:]); err != nil {
			w.host.Close()
			return
		}
		w.host.SetReadDeadline(time.Now().Add(w.every))
		if _, err := w.host.Read(msg[:]); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			w.host.Close()
			return
		}
	}
}

// selfPaced walks every w.every, and at once when a statfs every 100 ms
// sees the free space or inodes fall by more than the room left.
func (w *diskWatch) selfPaced() {
	for ; ; time.Sleep(diskPollInterval) {
		free := freeSpace(w.dirs[0])
		low := (w.reserve > 0 && free.bytes >= 0 && free.bytes < w.reserve) ||
			(w.inodeReserve > 0 && free.inodes >= 0 && free.inodes < w.inodeReserve)
		if w.fell(free) || low || time.Since(w.lastWalk) >= w.every {
			w.walk()
		}
	}
}

// freeSpace is the space and the inodes left on the file system of dir;
// -1 where unknown (statfs failed, or the file system counts no inodes,
// as btrfs).
func freeSpace(dir string) usage {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return usage{-1, -1}
	}
	free := usage{int64(st.Bavail) * st.Bsize, -1}
	if st.Files > 0 {
		free.inodes = int64(st.Ffree)
	}
	return free
}

// diskMaxMessage says why the job was killed and what to do.
func diskMaxMessage(used, limit int64) string {
	return fmt.Sprintf("\nberth: the job was killed: its files in /berth, /tmp and its images' writable layers take %s, over this instance's %s limit (provider_config disk_max); "+
		"clean up as the job goes, or ask the berth operator for a larger disk_max\n", bytesize.Format(used), bytesize.Format(limit))
}

// diskReserveMessage says why a job was killed at the reserve.
func diskReserveMessage(free, reserve int64) string {
	return fmt.Sprintf("\nberth: the job was killed: it kept writing while the host's disk had %s free, under the %s kept in reserve "+
		"for berth and other jobs (provider_config disk_reserve); retry later, or ask the berth operator to free disk space\n", bytesize.Format(free), bytesize.Format(reserve))
}

// inodesMaxMessage says why the job was killed for its files' number.
func inodesMaxMessage(used, limit int64) string {
	return fmt.Sprintf("\nberth: the job was killed: it has %d files and directories in /berth, /tmp and its images' writable layers, over this instance's limit of %d (provider_config inodes_max); "+
		"clean up as the job goes or pack small files into an archive, or ask the berth operator for a larger inodes_max\n", used, limit)
}

// inodesReserveMessage says why a job was killed at the inode reserve.
func inodesReserveMessage(free, reserve int64) string {
	return fmt.Sprintf("\nberth: the job was killed: it kept making files while the host's disk had %d inodes free, under the %d kept in reserve "+
		"for berth and other jobs (provider_config inodes_reserve); retry later, or ask the berth operator to free inodes\n", free, reserve)
}

// defaultInodesMax is a quarter of the inodes of the file system holding
// dir, like disk_max's default; 0 (no limit) where it counts none.
func defaultInodesMax(dir string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0
	}
	return int64(st.Files) / defaultDiskShare
}

// defaultInodesReserve is 5% of the inodes of the file system holding
// dir, at most maxDefaultInodesReserve: enough for berth's own files
// (a job's log, state) and other tenants' jobs.
func defaultInodesReserve(dir string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0
	}
	return min(int64(st.Files)/20, maxDefaultInodesReserve)
}

// maxDefaultInodesReserve bounds the default inode reserve, as 1 GiB bounds
// the byte reserve: 5% of a large file system's inodes is far more than
// berth and a few jobs need.
const maxDefaultInodesReserve = 100_000

// defaultDiskReserve is 5% of the file system holding dir, at most 1 GiB.
func defaultDiskReserve(dir string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0
	}
	return min(int64(st.Blocks)*st.Bsize/20, 1<<30)
}
