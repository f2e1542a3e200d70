package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A job's log in etcd is a series of immutable chunks of at most
// logChunkBytes, each under a key naming the byte offset it starts at, so
// that a follower reads on from the next key and a reader of the whole log
// concatenates a range. A chunk is written only where no chunk exists yet
// (CreateRevision = 0), so two writers (the job and a note) never
// overwrite each other; the job's chunks also prove the leader's fence, so
// that a paused old leader cannot add output after it lost its term.

func (b *etcdBackend) logPrefix(id string) string {
	n, _ := strconv.ParseUint(id, 10, 64)
	return fmt.Sprintf("%slogs/%020d/", b.prefix, n)
}

func (b *etcdBackend) chunkKey(id string, off int64) string {
	return fmt.Sprintf("%s%020d", b.logPrefix(id), off)
}

// logEnd returns the byte offset after the last chunk of job id's log.
func (b *etcdBackend) logEnd(ctx context.Context, id string) (int64, error) {
	p := b.logPrefix(id)
	resp, err := b.cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	kv := resp.Kvs[0]
	off, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), p), 10, 64)
	if err != nil {
		return 0, &CorruptError{Key: string(kv.Key), Err: errors.New("a log chunk's key does not end in its byte offset")}
	}
	return off + int64(len(kv.Value)), nil
}

// putChunk writes data at the end of job id's log and returns the offset
// after it. at is where the caller believes the log ends; -1 asks etcd.
func (b *etcdBackend) putChunk(ctx context.Context, id string, at int64, data []byte, f *fenceProof) (int64, error) {
	for range etcdRetries {
		if at < 0 {
			var err error
			if at, err = b.logEnd(ctx, id); err != nil {
				return 0, err
			}
		}
		key := b.chunkKey(id, at)
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}
		var orElse []clientv3.Op
		if f != nil {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(f.key), "=", f.rev))
			orElse = append(orElse, clientv3.OpGet(f.key))
		}
		resp, err := b.cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, string(data))).Else(orElse...).Commit()
		if err != nil {
			return 0, err
		}
		if resp.Succeeded {
			b.txns.Add(1)
			b.puts.Add(1)
			return at + int64(len(data)), nil
		}
		if f != nil && !fenceHolds(resp, f) {
			return 0, ErrFenced
		}
		at = -1 // another writer added a chunk there: append after it
	}
	return 0, fmt.Errorf("append to the log of job %s: %w", id, errConflict)
}

func (b *etcdBackend) openLog(id string) (logSink, error) {
	return &etcdLog{b: b, id: id, at: -1}, nil
}

// proof returns the fence a leader write proves now: the current term's,
// so that a job this manager kept running across its terms goes on
// logging. nil without fencing.
func (b *etcdBackend) proof() (*fenceProof, error) {
	if b.fence == nil {
		return nil, nil
	}
	key, rev, ok := b.fence()
	if !ok {
		return nil, ErrNotLeader
	}
	return &fenceProof{key, rev}, nil
}

func (b *etcdBackend) appendNote(id, note string) error {
	ctx, cancel := context.WithTimeout(b.ctx, etcdOpTimeout)
	defer cancel()
	_, err := b.putChunk(ctx, id, -1, []byte("\n[berth] "+note+"\n"), nil)
	return err
}

func (b *etcdBackend) readLog(id string, from int64, w io.Writer) (int64, error) {
	ctx, cancel := context.WithTimeout(b.ctx, etcdOpTimeout)
	defer cancel()
	start, end := b.chunkKey(id, from), clientv3.GetPrefixRangeEnd(b.logPrefix(id))
	var n int64
	for {
		// 16 chunks of 64 KiB: 1 MiB per response.
		resp, err := b.cli.Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(16))
		if err != nil {
			return n, err
		}
		for _, kv := range resp.Kvs {
			m, err := w.Write(kv.Value)
			n += int64(m)
			if err != nil {
				return n, err
			}
			start = string(kv.Key) + "\x00"
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return n, nil
		}
	}
}

func (b *etcdBackend) removeLog(id string) (bool, error) {
	ctx, cancel := context.WithTimeout(b.ctx, etcdOpTimeout)
	defer cancel()
	resp, err := b.cli.Delete(ctx, b.logPrefix(id), clientv3.WithPrefix())
	if err != nil {
		return false, err
	}
	if resp.Deleted > 0 {
		b.txns.Add(1)
		b.dels.Add(resp.Deleted)
	}
	return resp.Deleted > 0, nil
}

// etcdLog is a job's log being written to etcd: output gathers in memory
// and goes out as a chunk once it fills one, or logFlushDelay after it came.
// A failed write (etcd unreachable, no term) keeps the output and is tried
// again at the next flush: the job's log limit bounds what waits. Only
// Close reports output that could not be written.
type etcdLog struct {
	b  *etcdBackend
	id string

	mu     sync.Mutex
	buf    []byte
	at     int64 // where the next chunk goes; -1 until known
	timer  *time.Timer
	err    error // the last failed write, nil once one worked
	closed bool
}

func (l *etcdLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errors.New("write to a closed log")
	}
	l.buf = append(l.buf, p...)
	if len(l.buf) >= logChunkBytes && l.err == nil {
		l.flushLocked(false)
	}
	l.armLocked()
	return len(p), nil
}

// armLocked makes sure buffered output is written within logFlushDelay.
func (l *etcdLog) armLocked() {
	if len(l.buf) == 0 || l.timer != nil || l.closed {
		return
	}
	l.timer = time.AfterFunc(logFlushDelay, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.timer = nil
		l.flushLocked(true)
		l.armLocked() // what failed is tried again
	})
}

// flushLocked writes the buffered output in chunks: only whole chunks
// unless all is true. It keeps what it could not write.
func (l *etcdLog) flushLocked(all bool) error {
	ctx, cancel := context.WithTimeout(l.b.ctx, etcdOpTimeout)
	defer cancel()
	for len(l.buf) >= logChunkBytes || (all && len(l.buf) > 0) {
		n := min(len(l.buf), logChunkBytes)
		f, err := l.b.proof()
		at := l.at
		if err == nil {
			at, err = l.b.putChunk(ctx, l.id, l.at, l.buf[:n], f)
		}
		if err != nil {
			l.err = fmt.Errorf("write log to etcd: %w", err)
			return l.err
		}
		l.at, l.err = at, nil
		l.buf = l.buf[n:]
	}
	if len(l.buf) == 0 {
		l.buf = nil
	}
	return nil
}

// Sync writes everything buffered.
func (l *etcdLog) Sync() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked(true)
}

// Close writes everything buffered and stops further writes; an error
// means output was lost.
func (l *etcdLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.closed = true
	return l.flushLocked(true)
}
