package queue

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/api"
)

// The queue in etcd (OpenEtcd) keeps the same buckets as queue.db, one key
// per bbolt key, under a prefix:
//
//	<prefix>meta/version            "1"
//	<prefix>meta/seq                the last job ID issued, decimal
//	<prefix>jobs/<id>               a job's record, JSON
//	<prefix>scripts/<id>            its script, JSON
//	<prefix>queued/<id>             queued index ("" or "resume")
//	<prefix>running/<id>            running index ("")
//	<prefix>quarantine/<id>         a damaged job set aside
//	<prefix>env_owners/<env key>    owner of a parked environment
//	<prefix>logs/<id>/<offset>      a job's log, in chunks of <= 64 KiB
//	<prefix>idempotency/<hash>      the job a submit's Idempotency-Key made (idem.go)
//
// <id> and <offset> are 20-digit zero-padded decimals: they sort as the
// big-endian keys of queue.db do (FIFO), and stay readable for etcdctl.
//
// A transaction is optimistic, like etcd's STM: reads are served at one
// revision and recorded; the commit is one etcd Txn that applies only if
// nothing read changed since (the mod revision of every key read, and of
// every range scanned up to where the scan stopped), plus, for a leader
// write, the leader's fence. A conflict runs the transaction again.

// DefaultEtcdMaxLogBytes bounds one job's log in etcd (WithMaxLogBytes
// overrides it): etcd's database is small (2 GiB by default) and shared by
// every job. Output past it is dropped with a note, as in the file.
const DefaultEtcdMaxLogBytes = 4 << 20

const (
	// logChunkBytes bounds one log value: etcd refuses requests over
	// 1.5 MiB by default, and small values keep its database compact.
	logChunkBytes = 64 << 10
	// logFlushDelay bounds how long output waits in memory before it is
	// written to etcd when less than a chunk has come.
	logFlushDelay = 500 * time.Millisecond
	// etcdOpTimeout bounds one transaction (its reads and its commit).
	etcdOpTimeout = 5 * time.Second
	// etcdMaxOps stays under etcd's default --max-txn-ops (128) with room
	// for the range and fence comparisons.
	etcdMaxOps = 120
	// etcdRetries bounds how often a transaction runs again after
	// conflicting with another writer.
	etcdRetries = 100
	// scanPage is how many keys one range request of a scan returns.
	scanPage = 256
	// scriptPrefetch is how many jobs' scripts a list reads in one
	// request; it bounds the response, since scripts may be large.
	scriptPrefetch = 64
)

// errConflict: a key the transaction read changed before it committed.
var errConflict = errors.New("conflict with a concurrent write")

// readError is a failed read from the store (not a damaged value): the
// transaction fails rather than treat the job as damaged.
type readError struct{ err error }

func (e *readError) Error() string { return "read from etcd: " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// OpenEtcd opens (creating if needed) the queue kept in etcd under prefix
// (for example "/berth/queue/"; it must end with "/"). Every manager of a
// fleet opens it: any may read and submit; only the leader takes, starts
// and finishes jobs, proving fence at every such write. A nil fence means
// no fencing (one manager alone on etcd). Jobs a previous leader left
// running are failed by TakeOver, which the first take of each new term
// runs if the caller did not. The caller keeps cli open until Close.
func OpenEtcd(ctx context.Context, cli *clientv3.Client, prefix string, fence Fence, opts ...Option) (*Queue, error) {
	if !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("open queue in etcd: prefix %q must end with \"/\"", prefix)
	}
	o := options{logger: slog.Default(), maxLogBytes: DefaultEtcdMaxLogBytes}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxLogBytes <= 0 {
		o.maxLogBytes = DefaultEtcdMaxLogBytes // etcd is no place for a log without bound
	}
	q := newQueue(o)
	bctx, cancel := context.WithCancel(context.Background())
	b := &etcdBackend{q: q, cli: cli, prefix: prefix, fence: fence, ctx: bctx, cancel: cancel,
		floorFile: o.idFloorFile, floorDirty: make(chan struct{}, 1)}
	b.floor.Store(b.readFloor())
	q.st, q.fence = b, fence
	if err := b.init(ctx); err != nil {
		cancel()
		return nil, err
	}
	b.seqFloor(ctx)
	b.watching.Add(2)
	go b.watch()
	go b.writeFloors()
	return q, nil
}

// etcdBackend keeps the queue and its logs in etcd.
type etcdBackend struct {
	q      *Queue
	cli    *clientv3.Client
	prefix string
	fence  Fence

	ctx      context.Context // ends at close
	cancel   context.CancelFunc
	stopped  atomic.Bool
	watching sync.WaitGroup
	// watchFrom is the revision the watch goes on from (watch's own).
	watchFrom int64

	// submitMu lines up this manager's submits: they all write meta/seq,
	// so in parallel they would only conflict and retry.
	submitMu sync.Mutex

	// floor is the highest job ID this manager saw (etcdfloor.go), kept
	// in floorFile; floorDirty wakes its writer.
	floor      atomic.Uint64
	floorFile  string
	floorDirty chan struct{}

	// stats counts committed writes (see Stats).
	txns, puts, dels atomic.Int64
}

// EtcdStats counts what a queue wrote to etcd.
type EtcdStats struct {
	// Txns is the number of committed transactions (log chunks included).
	Txns int64
	// Puts and Deletes are the keys they wrote and deleted.
	Puts, Deletes int64
}

// EtcdStats returns what the queue wrote to etcd so far; zero for queue.db.
func (q *Queue) EtcdStats() EtcdStats {
	b, ok := q.st.(*etcdBackend)
	if !ok {
		return EtcdStats{}
	}
	return EtcdStats{Txns: b.txns.Load(), Puts: b.puts.Load(), Deletes: b.dels.Load()}
}

func (b *etcdBackend) init(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, etcdOpTimeout)
	defer cancel()
	// The fleet's state (ha.Store) keeps meta/id under its prefix: a queue
	// there would mix its keys with the state's, which refuses keys it
	// does not know.
	if resp, err := b.cli.Get(ctx, b.prefix+"meta/id", clientv3.WithCountOnly()); err == nil && resp.Count > 0 {
		return fmt.Errorf("open queue in etcd: prefix %q holds berth's fleet state (%smeta/id): give the queue its own prefix, such as %squeue/", b.prefix, b.prefix, b.prefix)
	}
	ver := b.prefix + "meta/version"
	resp, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(ver), "=", 0)).
		Then(clientv3.OpPut(ver, strconv.Itoa(schemaVersion))).
		Else(clientv3.OpGet(ver)).Commit()
	if err != nil {
		return fmt.Errorf("open queue in etcd under %q: %w; check ha.etcd_endpoints and that the cluster is healthy (etcdctl endpoint health)", b.prefix, err)
	}
	b.watchFrom = resp.Header.Revision + 1
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil // deleted meanwhile: the next writes work without it
	}
	n, err := strconv.Atoi(string(kvs[0].Value))
	if err != nil {
		return &CorruptError{Key: ver, Value: kvs[0].Value, Err: errors.New("the queue's layout version is not a number")}
	}
	if n > schemaVersion {
		return fmt.Errorf("open queue in etcd under %q: written by a newer berth (schema %d, this berth knows %d): upgrade berth", b.prefix, n, schemaVersion)
	}
	return nil
}

// seqFloor raises the ID floor to meta/seq: the IDs issued while this
// manager was down.
func (b *etcdBackend) seqFloor(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, etcdOpTimeout)
	defer cancel()
	resp, err := b.cli.Get(ctx, b.prefix+"meta/seq")
	if err != nil || len(resp.Kvs) == 0 {
		return
	}
	if n, err := strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64); err == nil {
		b.raiseFloor(n)
	}
}

// idBuckets are the buckets keyed by job ID.
var idBuckets = [][]byte{bucketJobs, bucketScripts, bucketQueued, bucketRunning, bucketQuarantine}

func isIDBucket(bucket []byte) bool {
	for _, b := range idBuckets {
		if bytes.Equal(b, bucket) {
			return true
		}
	}
	return false
}

func (b *etcdBackend) bucketPrefix(bucket []byte) string { return b.prefix + string(bucket) + "/" }

// key is the etcd key of a bucket's key.
func (b *etcdBackend) key(bucket, k []byte) string {
	if isIDBucket(bucket) && len(k) == 8 {
		return b.bucketPrefix(bucket) + fmt.Sprintf("%020d", binary.BigEndian.Uint64(k))
	}
	return b.bucketPrefix(bucket) + string(k)
}

// unkey is key's inverse; a key berth did not write comes back as it is.
func (b *etcdBackend) unkey(bucket []byte, full []byte) []byte {
	rel := bytes.TrimPrefix(full, []byte(b.bucketPrefix(bucket)))
	if isIDBucket(bucket) && len(rel) == 20 {
		if n, err := strconv.ParseUint(string(rel), 10, 64); err == nil && n > 0 {
			return seqKey(n)
		}
	}
	return bytes.Clone(rel)
}

// check refuses a value berth would misread, naming its key.
func (b *etcdBackend) check(bucket, k, v []byte, full string) error {
	var err error
	switch {
	case bytes.Equal(bucket, bucketJobs), bytes.Equal(bucket, bucketScripts):
		err = CheckRecord(bucket, k, v)
	case bytes.Equal(bucket, bucketQueued):
		if len(v) > 0 && !bytes.Equal(v, queuedResume) {
			err = fmt.Errorf("a queued-index entry is empty or %q, not %q", queuedResume, v)
		}
	}
	if err != nil {
		return &CorruptError{Key: full, Value: bytes.Clone(v), Err: err}
	}
	return nil
}

func (b *etcdBackend) view(fn func(tx) error) error {
	ctx, cancel := context.WithTimeout(b.ctx, etcdOpTimeout)
	defer cancel()
	return fn(newEtcdTx(ctx, b, false))
}

func (b *etcdBackend) update(kind writeKind, fn func(tx) error) error {
	var f *fenceProof
	if kind == writeLeader || kind == writeLeaderBatch {
		if b.fence != nil {
			key, rev, ok := b.fence()
			if !ok {
				return ErrNotLeader
			}
			f = &fenceProof{key, rev}
		}
	}
	if kind == writeBatch {
		b.submitMu.Lock()
		defer b.submitMu.Unlock()
	}
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(b.ctx, etcdOpTimeout)
		t := newEtcdTx(ctx, b, true)
		err := fn(t)
		if err == nil {
			err = t.commit(f)
		}
		cancel()
		if !errors.Is(err, errConflict) && !errors.Is(err, rpctypes.ErrCompacted) {
			return err
		}
		if attempt >= etcdRetries {
			return fmt.Errorf("the write conflicted with other managers' writes %d times in a row: %w", attempt, err)
		}
		if attempt > 3 {
			// Writers that keep colliding take turns rather than spin.
			time.Sleep(time.Duration(rand.Int64N(int64(attempt) * int64(time.Millisecond))))
		}
	}
}

func (b *etcdBackend) maxOps() int { return etcdMaxOps }

func (b *etcdBackend) log() *slog.Logger { return b.q.log }

func (b *etcdBackend) issued(uint64) {}

// probe reads while writes work (cheap, and no revision per probe), and
// writes while they fail: etcd serves reads with its NOSPACE alarm raised,
// so only a write says when submits work again.
func (b *etcdBackend) probe(size int) error {
	ctx, cancel := context.WithTimeout(b.ctx, etcdOpTimeout)
	defer cancel()
	if size > 64 { // Health asks for a big probe while writes fail
		_, err := b.cli.Put(ctx, b.prefix+"meta/health_probe", time.Now().UTC().Format(time.RFC3339))
		return err
	}
	_, err := b.cli.Get(ctx, b.prefix+"meta/version")
	return err
}

func (b *etcdBackend) probeLogs() error { return nil }

func (b *etcdBackend) explain(what string, err error) error {
	var ce *CorruptError
	switch {
	case b.closed(err):
		return fmt.Errorf("%s: %w", what, ErrClosed)
	case errors.Is(err, ErrFenced), errors.Is(err, ErrNotLeader), errors.As(err, &ce):
		return fmt.Errorf("%s: %w", what, err)
	case errors.Is(err, rpctypes.ErrTooManyOps):
		return fmt.Errorf("%s: %w in etcd under %q: %w: the etcd cluster allows fewer operations per transaction than berth's queue needs (120): start etcd with --max-txn-ops 128 or more; nothing was changed", what, ErrWrite, b.prefix, err)
	case errors.Is(err, rpctypes.ErrNoSpace):
		return fmt.Errorf("%s: %w: etcd's database is full (its NOSPACE alarm is raised): compact and defragment it or raise --quota-backend-bytes, then `etcdctl alarm disarm`; nothing was changed", what, ErrNoSpace)
	}
	return fmt.Errorf("%s: %w in etcd under %q: %w: check that the etcd cluster is healthy (etcdctl endpoint health); after a timeout the write may or may not have been applied", what, ErrWrite, b.prefix, err)
}

func (b *etcdBackend) closed(err error) bool { return err != nil && b.stopped.Load() }

// remedy is etcd's own answer to a full database (its NOSPACE alarm),
// not the disk advice of queue.db: etcd refuses writes at its quota
// whatever the disk holds, until the old revisions are compacted, the
// space is defragmented back and the alarm disarmed (issue 32).
func (b *etcdBackend) remedy(err error) string {
	if errors.Is(err, ErrNoSpace) || errors.Is(err, rpctypes.ErrNoSpace) || strings.Contains(err.Error(), "NOSPACE") {
		return "etcd's database reached its quota (NOSPACE alarm): compact the history " +
			"(etcdctl compact $(etcdctl endpoint status --write-out=json | grep -o '\"revision\":[0-9]*' | cut -d: -f2)), " +
			"defragment every member (etcdctl defrag --cluster), then disarm the alarm (etcdctl alarm disarm); " +
			"or raise its --quota-backend-bytes (no berth restart needed)"
	}
	return "check that etcd answers and accepts writes (etcdctl endpoint health; etcdctl alarm list) (no berth restart needed)"
}

func (b *etcdBackend) where() string { return fmt.Sprintf("etcd under %q", b.prefix) }

func (b *etcdBackend) backup() error { return nil } // etcd keeps its own copies: etcdctl snapshot save

func (b *etcdBackend) close() error {
	b.stopped.Store(true)
	b.cancel()
	b.watching.Wait()
	return nil
}

// watch wakes the queue's waiters on every change under the prefix, made
// by this manager or another (a submit to a standby), and cancels a
// running job of this manager whose record asks for it.
func (b *etcdBackend) watch() {
	defer b.watching.Done()
	for b.ctx.Err() == nil {
		// From the revision after the last one seen (at first, the
		// open's): a change made before the watch reached etcd still
		// wakes the waiters.
		wch := b.cli.Watch(clientv3.WithRequireLeader(b.ctx), b.prefix, clientv3.WithPrefix(), clientv3.WithRev(b.watchFrom))
		for resp := range wch {
			if resp.CompactRevision > 0 {
				b.watchFrom = resp.CompactRevision // history gone: go on from what is left
			}
			if resp.Err() != nil {
				if errors.Is(resp.Err(), rpctypes.ErrFutureRev) || strings.Contains(resp.Err().Error(), "future revision") {
					// etcd counts from an earlier revision than seen:
					// it lost its data. Go on from now.
					b.watchFrom = 0
				}
				break
			}
			for _, ev := range resp.Events {
				b.watchFrom = ev.Kv.ModRevision + 1
				if ev.Type == clientv3.EventTypePut {
					b.floorFromKey(ev.Kv.Key)
				}
				b.onEvent(ev.Type == clientv3.EventTypePut, ev.Kv.Key, ev.Kv.Value)
			}
			b.q.changed.fire()
		}
		b.q.changed.fire() // changes may have been missed meanwhile
		select {
		case <-b.ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (b *etcdBackend) onEvent(put bool, key, value []byte) {
	if !put || !bytes.HasPrefix(key, []byte(b.bucketPrefix(bucketJobs))) {
		return
	}
	var rec record
	if decodeValue(value, &rec) != nil || !rec.CancelRequested || rec.State != api.JobRunning {
		return
	}
	if j := b.q.liveJob(rec.ID); j != nil {
		j.cancel()
	}
}
