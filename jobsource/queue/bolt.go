package queue

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/berth-ci/berth/internal/boltfile"
)

// boltTx is a tx over a bbolt transaction: the buckets are bbolt buckets,
// so queue.db stays what it always was.
type boltTx struct{ tx *bolt.Tx }

func (t boltTx) get(bucket, key []byte) ([]byte, error) {
	b := t.tx.Bucket(bucket)
	if b == nil {
		return nil, nil
	}
	return b.Get(key), nil
}

func (t boltTx) peek(bucket, key []byte) ([]byte, error) { return t.get(bucket, key) }

func (t boltTx) put(bucket, key, value []byte) error {
	b := t.tx.Bucket(bucket)
	if b == nil {
		var err error
		if b, err = t.tx.CreateBucketIfNotExists(bucket); err != nil {
			return err
		}
	}
	return b.Put(key, value)
}

func (t boltTx) del(bucket, key []byte) error {
	if b := t.tx.Bucket(bucket); b != nil {
		return b.Delete(key)
	}
	return nil
}

func (t boltTx) scan(bucket []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	b := t.tx.Bucket(bucket)
	if b == nil {
		return nil
	}
	c := b.Cursor()
	first, next := c.First, c.Next
	if reverse {
		first, next = c.Last, c.Prev
	}
	for k, v := first(); k != nil; k, v = next() {
		more, err := fn(k, v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (t boltTx) nextSequence() (uint64, error) { return t.tx.Bucket(bucketJobs).NextSequence() }

func (t boltTx) sealed() bool { return true }

// boltBackend keeps the queue in queue.db and each job's log in
// logs/ID.log.
type boltBackend struct {
	q      *Queue // for issued (ids.go)
	dir    string
	logDir string
	db     *bolt.DB
	backer *boltfile.Backer
}

func (b *boltBackend) view(fn func(tx) error) error {
	return b.db.View(func(t *bolt.Tx) error { return fn(boltTx{t}) })
}

func (b *boltBackend) update(kind writeKind, fn func(tx) error) error {
	if kind == writeBatch || kind == writeLeaderBatch {
		return b.db.Batch(func(t *bolt.Tx) error { return fn(boltTx{t}) })
	}
	return b.db.Update(func(t *bolt.Tx) error { return fn(boltTx{t}) })
}

func (b *boltBackend) maxOps() int { return 0 }

func (b *boltBackend) issued(id uint64) { b.q.issued(id) }

func (b *boltBackend) logPath(id string) string { return filepath.Join(b.logDir, id+".log") }

func (b *boltBackend) openLog(id string) (logSink, error) {
	f, err := os.OpenFile(b.logPath(id), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return fileSink{f}, nil
}

// fileSink is a log file; Close syncs first so that a follower that sees
// the job's final state reads a complete log.
type fileSink struct{ *os.File }

func (s fileSink) Close() error {
	if err := s.File.Sync(); err != nil {
		s.File.Close()
		return fmt.Errorf("sync log: %w", err)
	}
	if err := s.File.Close(); err != nil {
		return fmt.Errorf("close log: %w", err)
	}
	return nil
}

func (b *boltBackend) readLog(id string, from int64, w io.Writer) (int64, error) {
	f, err := os.Open(b.logPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if from > 0 {
		if _, err := f.Seek(from, io.SeekStart); err != nil {
			return 0, err
		}
	}
	return io.Copy(w, f)
}

func (b *boltBackend) appendNote(id, note string) error {
	f, err := os.OpenFile(b.logPath(id), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.WriteString(f, "\n[berth] "+note+"\n")
	return err
}

func (b *boltBackend) removeLog(id string) (bool, error) {
	err := os.Remove(b.logPath(id))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

func (b *boltBackend) probe(size int) error {
	err := b.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyHealthProbe, make([]byte, size))
	})
	if err == nil && size > 64 {
		// Give the big probe's pages back to the free list.
		err = b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyHealthProbe, nil) })
	}
	return err
}

func (b *boltBackend) probeLogs() error { return probeDir(b.logDir) }

// explain explains a failed write. bbolt rolls the transaction back, so
// the caller can say nothing was changed.
func (b *boltBackend) explain(what string, err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("%s: %w", what, ErrClosed)
	}
	if errors.Is(err, berrors.ErrMaxSizeReached) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%s: %w in %s (%v): free disk space, then retry; nothing was changed", what, ErrNoSpace, b.dir, err)
	}
	return fmt.Errorf("%s: %w %s: %w: check that the disk is healthy and writable; nothing was changed", what, ErrWrite, filepath.Join(b.dir, "queue.db"), err)
}

func (b *boltBackend) closed(err error) bool { return errors.Is(err, berrors.ErrDatabaseNotOpen) }

func (b *boltBackend) where() string { return filepath.Join(b.dir, "queue.db") }

func (b *boltBackend) backup() error { return b.backer.Backup() }

func (b *boltBackend) close() error { return b.db.Close() }

func (b *boltBackend) remedy(error) string {
	return "free disk space or fix the disk (no restart needed)"
}
