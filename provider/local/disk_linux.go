package local

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
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

// diskUsage sums the space allocated to the files under dirs, counting a
// file with several links once.
func diskUsage(dirs []string) int64 {
	type ino struct{ dev, ino uint64 }
	seen := map[ino]bool{}
	var total int64
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
			total += st.Blocks * 512
			return nil
		})
	}
	return total
}

// diskWatch enforces disk_max inside the sandbox. Walking the directories
// costs time, so it walks every few seconds, and sooner when the file
// system's free space fell by more than the room left under the limit: a
// job that writes fast is caught within a fraction of a second of crossing
// the limit. Berth's diskPoller watches the free space for all sandboxes
// at once (host, one statfs every 100 ms in berth); without it (no socket
// given, or berth gone) the sandbox does a statfs every 100 ms itself,
// which costs a timer wake-up each.
type diskWatch struct {
	limit int64
	// reserve is the free space of the file system no job eats into: a
	// walk that finds less free while the usage grew ends the job.
	reserve int64
	dirs    []string
	log     *slog.Logger
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

	used, freeAtWalk, prevUsed int64
	every                      time.Duration
	lastWalk                   time.Time
}

func (w *diskWatch) run() {
	if w.minEvery == 0 {
		w.minEvery = 2 * time.Second
	}
	w.freeAtWalk, w.every = -1, w.minEvery
	if w.host != nil {
		w.hostPaced()
		w.log.Info("berth's disk poller is gone; the sandbox watches the free space itself")
	}
	w.selfPaced()
}

// walk measures the directories and ends the job when they are over the
// limit.
func (w *diskWatch) walk() {
	start := time.Now()
	w.used = diskUsage(w.dirs)
	took := time.Since(start)
	w.lastWalk, w.freeAtWalk = time.Now(), freeBytes(w.dirs[0])
	// Walking a large tree must not become the sandbox's main work.
	w.every = max(w.minEvery, 20*took)
	grew := w.used > w.prevUsed
	w.prevUsed = w.used
	switch {
	case w.used > w.limit:
		w.log.Warn("job over disk_max: killing it and emptying its directories", "used", w.used, "disk_max", w.limit, "walk_took", took.String())
		w.over(w.used, diskMaxMessage(w.used, w.limit))
	case w.reserve > 0 && w.freeAtWalk >= 0 && w.freeAtWalk < w.reserve && grew:
		w.log.Warn("job writing into the disk reserve: killing it and emptying its directories", "used", w.used, "free", w.freeAtWalk, "disk_reserve", w.reserve)
		w.over(w.used, diskReserveMessage(w.freeAtWalk, w.reserve))
	default:
		return
	}
	w.used, w.freeAtWalk, w.prevUsed = 0, -1, 0
}

// room is how far the free space may fall before a walk must look: the
// room left under the limit, or above the reserve if that is less.
func (w *diskWatch) room(free int64) int64 {
	room := w.limit - w.used
	if w.reserve > 0 && free >= 0 {
		room = min(room, max(free-w.reserve, 0))
	}
	return room
}

// hostPaced walks after every request of berth's poller and every
// w.every, and reports each walk. It returns when berth is gone.
func (w *diskWatch) hostPaced() {
	var report [diskReportSize]byte
	var msg [64]byte
	for {
		w.walk()
		free := w.freeAtWalk
		if free < 0 {
			free = -1 // statfs failed: berth cannot compare; walks go on
		}
		binary.LittleEndian.PutUint64(report[0:8], uint64(free))
		binary.LittleEndian.PutUint64(report[8:16], uint64(w.room(w.freeAtWalk)))
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
// sees the free space fall by more than the room left.
func (w *diskWatch) selfPaced() {
	for ; ; time.Sleep(diskPollInterval) {
		free := freeBytes(w.dirs[0])
		grew := w.freeAtWalk >= 0 && free >= 0 && w.freeAtWalk-free > w.room(w.freeAtWalk)
		low := w.reserve > 0 && free >= 0 && free < w.reserve
		if grew || low || time.Since(w.lastWalk) >= w.every {
			w.walk()
		}
	}
}

// freeBytes is the space left on the file system of dir, or -1.
func freeBytes(dir string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * st.Bsize
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

// defaultDiskReserve is 5% of the file system holding dir, at most 1 GiB.
func defaultDiskReserve(dir string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0
	}
	return min(int64(st.Blocks)*st.Bsize/20, 1<<30)
}
