package local

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// diskPoller watches the free space of the file system the instances'
// disks live on once for every sandbox of the provider, so that sandboxes
// need not wake up ten times a second each to do so.
//
// Each sandbox enforces its own disk_max and inodes_max (diskWatch): it
// walks /berth and /tmp every few seconds, and at once when the file
// system's free space or free inodes fell by more than the room it had
// left at its last walk. Polling that
// free space every 100 ms in every sandbox cost 2.4 ms of CPU per second
// per idle sandbox on the measuring machine (a timer wake-up costs ~200 µs
// there), so 1,000 idle sandboxes needed more than two cores. Here one
// statfs every 100 ms serves them all: after each walk a sandbox reports
// (free space at the walk, room left) over a socket pair berth holds the
// other end of, and berth tells it to walk again the moment free space
// fell by more than that room. The reaction time stays the same.
//
// A sandbox whose berth is gone (the socket reads EOF: berth stopped or
// was killed) polls the free space itself again, so disk_max holds while
// no berth runs. Everything a sandbox sends is checked: one report is
// exactly diskReportSize bytes, anything else is ignored.
type diskPoller struct {
	dir string // a directory on the disks' file system, for statfs
	dev uint64 // its device: a sandbox whose disk is elsewhere polls itself
	log *slog.Logger

	mu      sync.Mutex
	ep      int // epoll descriptor of the sandboxes' sockets; -1 once closed
	sboxes  map[int32]*polledSandbox
	running bool // the tick loop runs
}

// polledSandbox is berth's view of one sandbox's last report.
type polledSandbox struct {
	fd         int
	id         string
	freeAtWalk usage
	room       usage
	armed      bool // a report arrived and no walk was asked for since
}

// diskReportSize is the size of a sandbox's report: four little-endian
// int64s, the free space at its walk, the room left under disk_max, the
// free inodes at its walk and the room left under inodes_max.
const diskReportSize = 32

// encodeDiskReport is a sandbox's report of its walk.
func encodeDiskReport(free, room usage) [diskReportSize]byte {
	var b [diskReportSize]byte
	binary.LittleEndian.PutUint64(b[0:8], uint64(free.bytes))
	binary.LittleEndian.PutUint64(b[8:16], uint64(room.bytes))
	binary.LittleEndian.PutUint64(b[16:24], uint64(free.inodes))
	binary.LittleEndian.PutUint64(b[24:32], uint64(room.inodes))
	return b
}

// decodeDiskReport reads encodeDiskReport's bytes.
func decodeDiskReport(b []byte) (free, room usage) {
	u := func(i int) int64 { return int64(binary.LittleEndian.Uint64(b[i : i+8])) }
	return usage{u(0), u(16)}, usage{u(8), u(24)}
}

// diskPollInterval is how often the poller (and a sandbox without one)
// looks at the free space.
const diskPollInterval = 100 * time.Millisecond

func newDiskPoller(dir string, log *slog.Logger) (*diskPoller, error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil, err
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	return &diskPoller{dir: dir, dev: st.Dev, log: log, ep: ep, sboxes: map[int32]*polledSandbox{}}, nil
}

// add registers the sandbox about to start for instance id with its disk
// at disk, and returns the sandbox's end of the socket pair (the caller
// closes it once the sandbox has its copy). It returns nil, nil when that
// disk is on another file system than the poller's: that sandbox polls
// itself.
func (d *diskPoller) add(id, disk string) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Stat(disk, &st); err != nil {
		return nil, err
	}
	if st.Dev != d.dev {
		return nil, nil
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("disk poller socket pair: %w", err)
	}
	ours := fds[0]
	if err := unix.SetNonblock(ours, true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(ours)}
	if d.ep < 0 {
		err = os.ErrClosed
	} else {
		err = unix.EpollCtl(d.ep, unix.EPOLL_CTL_ADD, ours, &ev)
	}
	if err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, fmt.Errorf("disk poller: %w", err)
	}
	d.sboxes[int32(ours)] = &polledSandbox{fd: ours, id: id}
	if !d.running {
		d.running = true
		go d.loop()
	}
	return os.NewFile(uintptr(fds[1]), "disk-poller"), nil
}

// loop ticks while any sandbox is registered.
func (d *diskPoller) loop() {
	t := time.NewTicker(diskPollInterval)
	defer t.Stop()
	for range t.C {
		if !d.tick() {
			return
		}
	}
}

// tick reads the reports that arrived, then compares the free space with
// every sandbox's room. It returns false (and marks the loop stopped) when
// no sandbox is left or the poller is closed.
func (d *diskPoller) tick() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ep < 0 || len(d.sboxes) == 0 {
		d.running = false
		return false
	}
	d.readReports()
	var st unix.Statfs_t
	if err := unix.Statfs(d.dir, &st); err != nil {
		return true // the sandboxes' own walks still run
	}
	free := usage{int64(st.Bavail) * st.Bsize, int64(st.Ffree)}
	for _, s := range d.sboxes {
		if s.armed && ((s.freeAtWalk.bytes >= 0 && s.freeAtWalk.bytes-free.bytes > s.room.bytes) ||
			(s.freeAtWalk.inodes >= 0 && st.Files > 0 && s.freeAtWalk.inodes-free.inodes > s.room.inodes)) {
			s.armed = false
			// The sandbox walks now and reports again. A full socket
			// buffer means a walk is asked for already.
			unix.Sendto(s.fd, []byte{1}, unix.MSG_DONTWAIT, nil)
		}
	}
	return true
}

// readReports drains the sockets epoll says are readable; sockets whose
// sandbox is gone are dropped.
func (d *diskPoller) readReports() {
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(d.ep, events, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		for _, ev := range events[:n] {
			if s, ok := d.sboxes[ev.Fd]; ok {
				d.readReport(s)
			}
		}
		if n < len(events) {
			return
		}
	}
}

// readReport takes the latest of a sandbox's pending reports. A sandbox
// sends one per walk; reading at most a few per tick keeps one that sends
// more from holding up the others.
func (d *diskPoller) readReport(s *polledSandbox) {
	var buf [diskReportSize + 1]byte
	for range 8 {
		n, _, err := unix.Recvfrom(s.fd, buf[:], unix.MSG_DONTWAIT)
		switch {
		case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
			return
		case err != nil || n == 0: // the sandbox is gone
			d.drop(s)
			return
		case n == diskReportSize:
			s.freeAtWalk, s.room = decodeDiskReport(buf[:n])
			s.armed = s.freeAtWalk.bytes >= 0 || s.freeAtWalk.inodes >= 0
		}
	}
}

func (d *diskPoller) drop(s *polledSandbox) {
	unix.EpollCtl(d.ep, unix.EPOLL_CTL_DEL, s.fd, nil)
	unix.Close(s.fd)
	delete(d.sboxes, int32(s.fd))
}

// close stops the poller; its sandboxes read EOF and poll themselves.
func (d *diskPoller) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ep < 0 {
		return
	}
	for _, s := range d.sboxes {
		d.drop(s)
	}
	unix.Close(d.ep)
	d.ep = -1
}

// watched is the number of sandboxes the poller serves.
func (d *diskPoller) watched() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.sboxes)
}
