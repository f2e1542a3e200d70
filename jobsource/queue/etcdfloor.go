package queue

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Job IDs in etcd count up in <prefix>meta/seq. An etcd restarted empty
// (a lost volume, a restore gone wrong) would count again from 1, and new
// jobs would take the IDs of jobs already run or still running: their
// ends, held by a manager while etcd was away, would be recorded on the
// new jobs (issue 32). So every manager keeps the highest job ID it saw
// (its own submits and the others', from the watch) in a file beside its
// other state (WithIDFloorFile), and a submit never issues an ID at or
// below it, whatever meta/seq says: the ID floor bbolt's last-id gives
// queue.db (ids.go).

// WithIDFloorFile keeps the highest job ID seen in path (the queue in etcd
// only): IDs never repeat after etcd lost its data.
func WithIDFloorFile(path string) Option { return func(o *options) { o.idFloorFile = path } }

// readFloor returns the ID recorded in the floor file, 0 without one.
func (b *etcdBackend) readFloor() uint64 {
	if b.floorFile == "" {
		return 0
	}
	raw, err := os.ReadFile(b.floorFile)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	return n
}

// raiseFloor notes an ID seen, and wakes the writer when it is new.
func (b *etcdBackend) raiseFloor(id uint64) {
	for {
		cur := b.floor.Load()
		if id <= cur {
			return
		}
		if b.floor.CompareAndSwap(cur, id) {
			break
		}
	}
	select {
	case b.floorDirty <- struct{}{}:
	default:
	}
}

// floorFromKey raises the floor to the ID of a job record's key.
func (b *etcdBackend) floorFromKey(key []byte) {
	p := []byte(b.bucketPrefix(bucketJobs))
	if !bytes.HasPrefix(key, p) {
		return
	}
	if n, err := strconv.ParseUint(string(key[len(p):]), 10, 64); err == nil {
		b.raiseFloor(n)
	}
}

// floorFromID raises the floor to a job ID this manager issued.
func (b *etcdBackend) floorFromID(id string) {
	if n, err := strconv.ParseUint(id, 10, 64); err == nil {
		b.raiseFloor(n)
	}
}

// writeFloors writes the floor file whenever the floor rose, until close:
// outside the submit path, which must not wait for a file per job.
func (b *etcdBackend) writeFloors() {
	defer b.watching.Done()
	written := b.readFloor()
	for {
		select {
		case <-b.floorDirty:
		case <-b.ctx.Done():
			b.writeFloor(&written)
			return
		}
		b.writeFloor(&written)
	}
}

// writeFloor writes the floor through a rename when above written.
func (b *etcdBackend) writeFloor(written *uint64) {
	n := b.floor.Load()
	if b.floorFile == "" || n <= *written {
		return
	}
	tmp := b.floorFile + ".tmp"
	err := os.MkdirAll(filepath.Dir(b.floorFile), 0o700)
	if err == nil {
		err = os.WriteFile(tmp, []byte(strconv.FormatUint(n, 10)+"\n"), 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, b.floorFile)
	}
	if err != nil {
		b.q.log.Warn("cannot record the highest job ID seen; job IDs could repeat if etcd loses its data", "err", fmt.Errorf("write %s: %w", b.floorFile, err))
		return
	}
	*written = n
}
