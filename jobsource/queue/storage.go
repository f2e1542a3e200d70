package queue

import (
	"io"
)

// The queue keeps its jobs in named buckets of ordered keys (jobs, scripts,
// the queued and running indexes, env_owners, quarantine, meta) and reads
// and writes them in transactions. Two stores hold them: the bbolt file
// (Open, one berth) and etcd (OpenEtcd, two or three managers sharing one
// queue). The seam between the queue's logic and a store is tx and
// backend: the smallest set of operations both implement, so that every
// rule of the queue (FIFO, indexes, quarantine, retention) is written once.

// tx is one transaction over the queue's buckets. Keys of the job buckets
// are 8-byte big-endian IDs, so that they sort in submission order.
type tx interface {
	// get returns the value under key in bucket, nil when there is none
	// (a present key with an empty value returns a non-nil empty slice).
	// The slice is valid only during the transaction.
	get(bucket, key []byte) ([]byte, error)
	// peek is get for a value the transaction only looks at to choose
	// (etcd's commit does not require it unchanged, so that a scan that
	// reads many records stays within etcd's bound on comparisons).
	peek(bucket, key []byte) ([]byte, error)
	// put stores value under key in bucket, creating the bucket if needed.
	put(bucket, key, value []byte) error
	// del deletes key from bucket; deleting a missing key is no error.
	del(bucket, key []byte) error
	// scan calls fn for the keys of bucket in ascending order (descending
	// when reverse) until fn returns false or an error. It does not see
	// the transaction's own writes: callers collect keys, then write.
	scan(bucket []byte, reverse bool, fn func(k, v []byte) (bool, error)) error
	// nextSequence returns the next job ID.
	nextSequence() (uint64, error)
	// sealed says whether values carry boltfile's checksum (bbolt), or
	// are plain JSON (etcd checks its data itself).
	sealed() bool
}

// writeKind says how a write transaction is committed.
type writeKind int

const (
	// writeAny is a write any manager may make: a submit, a cancel, a prune.
	// In etcd it is guarded only by the revisions it read.
	writeAny writeKind = iota
	// writeBatch is writeAny for callers that arrive together (submits):
	// bbolt commits them in one transaction.
	writeBatch
	// writeLeader is a write only the leader may make (taking, starting
	// and finishing jobs, failing a previous leader's jobs): in etcd it
	// also proves the leader's fence.
	writeLeader
	// writeLeaderBatch is writeLeader batched like writeBatch.
	writeLeaderBatch
)

// backend is a store of the queue: transactions plus the jobs' logs.
type backend interface {
	// view runs fn in a read transaction.
	view(fn func(tx) error) error
	// update runs fn in a write transaction committed as kind says. fn may
	// run more than once (a batch that failed, an etcd conflict), so it
	// must set everything it computes.
	update(kind writeKind, fn func(tx) error) error
	// maxOps bounds the keys one write transaction should touch (etcd's
	// --max-txn-ops); 0 means no bound.
	maxOps() int
	// issued is called inside the submit transaction with the new job's ID.
	issued(id uint64)

	// openLog opens job id's log for appending.
	openLog(id string) (logSink, error)
	// readLog copies job id's log from byte offset from to w and returns
	// how many bytes it copied. A job without a log copies nothing.
	readLog(id string, from int64, w io.Writer) (int64, error)
	// appendNote adds a line from berth to job id's log.
	appendNote(id, note string) error
	// removeLog deletes job id's log and says whether there was one.
	removeLog(id string) (bool, error)

	// probe checks the store can take a write now; size is how big the
	// probe should be (a submit's size while writes fail). etcd reads
	// instead while writes work.
	probe(size int) error
	// probeLogs checks job logs can be written.
	probeLogs() error
	// explain turns a failed write into the queue's typed errors.
	explain(what string, err error) error
	// closed says whether err means the store was closed.
	closed(err error) bool
	// where names the store in messages.
	where() string
	// remedy says what an operator does about err, a failed write.
	remedy(err error) string
	// backup writes the last good copy (bbolt) or nothing (etcd).
	backup() error
	// close releases the store.
	close() error
}

// logSink is an open job log.
type logSink interface {
	io.Writer
	// Sync makes what was written durable (and visible to readers).
	Sync() error
	// Close syncs and stops further writes.
	Close() error
}
