//go:build linux

package local

import (
	"crypto/rand"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pollerFixture is a disk directory watched the way a sandbox watches its
// /berth, with berth's diskPoller on the other end of the socket. Periodic
// walks are an hour apart, so only the free-space trigger can catch a
// write in time.
type pollerFixture struct {
	disk   string
	poller *diskPoller
	over   chan int64
}

func newPollerFixture(t *testing.T, limit int64, opts ...func(*diskWatch)) *pollerFixture {
	t.Helper()
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk")
	if err := os.Mkdir(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	poller, err := newDiskPoller(dir, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(poller.close)
	sandboxEnd, err := poller.add("local-0000000001", disk)
	if err != nil || sandboxEnd == nil {
		t.Fatalf("add: %v, %v", sandboxEnd, err)
	}
	// What the sandbox does with its inherited descriptor.
	fd, err := unix.Dup(int(sandboxEnd.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	sandboxEnd.Close()
	unix.SetNonblock(fd, true)
	f := &pollerFixture{disk: disk, poller: poller, over: make(chan int64, 10)}
	w := &diskWatch{limit: limit, dirs: []string{disk}, log: slog.Default(), minEvery: time.Hour,
		host: os.NewFile(uintptr(fd), "disk-poller"), over: func(used int64, _ string) {
			removeAll(filepath.Join(disk, "big"))
			removeAll(filepath.Join(disk, "many"))
			f.over <- used
		}}
	for _, o := range opts {
		o(w)
	}
	go w.run()
	// The first walk's report reaches the poller.
	deadline := time.Now().Add(time.Minute)
	for !f.armed() {
		if time.Now().After(deadline) {
			t.Fatal("the watch never reported its first walk to the poller")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return f
}

func (f *pollerFixture) armed() bool {
	f.poller.mu.Lock()
	defer f.poller.mu.Unlock()
	for _, s := range f.poller.sboxes {
		return s.armed
	}
	return false
}

// write puts n bytes of data on the disk, allocated on the file system.
func (f *pollerFixture) write(t *testing.T, n int) {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	file, err := os.Create(filepath.Join(f.disk, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	if _, err := file.Write(b); err != nil {
		t.Fatal(err)
	}
	file.Sync()
}

func (f *pollerFixture) wantOver(t *testing.T, limit int64) {
	t.Helper()
	select {
	case used := <-f.over:
		if used <= limit {
			t.Errorf("over called with %d bytes used, not over the %d limit", used, limit)
		}
	case <-time.After(time.Minute):
		t.Fatal("a write past disk_max was not caught (periodic walks are an hour apart: the free-space trigger did not fire)")
	}
}

func TestBerthsPollerTellsTheSandboxToWalkWhenFreeSpaceFalls(t *testing.T) {
	const limit = 1 << 20
	f := newPollerFixture(t, limit)
	f.write(t, 32<<20)
	f.wantOver(t, limit)
	if n := f.poller.watched(); n != 1 {
		t.Errorf("poller watches %d sandboxes, want 1", n)
	}
}

// Issue 43, item 4: files made by the thousand take inodes, not bytes;
// the free inodes falling past the room under inodes_max make the sandbox
// walk at once, as free bytes do.
func TestBerthsPollerTellsTheSandboxToWalkWhenInodesFall(t *testing.T) {
	if freeSpace(t.TempDir()).inodes < 0 {
		t.Skip("the temporary directory's file system counts no inodes")
	}
	const limit = 100
	f := newPollerFixture(t, 1<<40, func(w *diskWatch) { w.inodeLimit = limit })
	many := filepath.Join(f.disk, "many")
	if err := os.Mkdir(many, 0o755); err != nil {
		t.Fatal(err)
	}
	// The sandbox may catch the files while they are being made and
	// empty its directories: a failed create then means it was caught.
	for i := range 2000 {
		file, err := os.Create(filepath.Join(many, strconv.Itoa(i)))
		if err != nil {
			break
		}
		file.Close()
	}
	select {
	case <-f.over:
	case <-time.After(time.Minute):
		t.Fatal("2,000 files past inodes_max 100 were not caught (periodic walks are an hour apart: the free-inode trigger did not fire)")
	}
}

func TestSandboxPollsItselfOnceBerthIsGone(t *testing.T) {
	const limit = 1 << 20
	f := newPollerFixture(t, limit)
	f.poller.close() // berth stopped: the sandbox reads EOF
	time.Sleep(3 * diskPollInterval)
	f.write(t, 32<<20)
	f.wantOver(t, limit)
}

func TestPollerIgnoresMalformedReportsAndDropsGoneSandboxes(t *testing.T) {
	dir := t.TempDir()
	poller, err := newDiskPoller(dir, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer poller.close()
	end, err := poller.add("local-0000000002", dir)
	if err != nil || end == nil {
		t.Fatalf("add: %v, %v", end, err)
	}
	for _, msg := range [][]byte{make([]byte, 3), make([]byte, diskReportSize+1)} {
		if _, err := end.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	poller.tick()
	if anyArmed(poller) {
		t.Error("a malformed report armed the poller")
	}
	end.Close()
	poller.tick()
	if n := poller.watched(); n != 0 {
		t.Errorf("poller still watches %d sandboxes after the sandbox closed its end", n)
	}
}

func anyArmed(p *diskPoller) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.sboxes {
		if s.armed {
			return true
		}
	}
	return false
}
