package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
)

// etcd restored from a snapshot (docs/ha.md's recovery) or rolled back to
// an older copy of its data holds the fleet's identity, so the identity
// check lets it through, but it is the past: jobs submitted after the
// snapshot are gone, jobs that ran since are queued or running again, and
// instances that run those jobs are recorded idle (issue 43). Every
// manager holds the evidence: the highest job ID it saw (its ID floor,
// etcdfloor.go) can only come from a meta/seq at least as high, so a
// meta/seq below it is a store older than what this manager already saw.

// RestoreReason is the end recorded by `berth state accept-restore` for a
// job the restored state does not account for: one issued after the
// snapshot, or one it holds queued or running although it may have run
// since.
const RestoreReason = "etcd was restored from a snapshot taken before this job ended; berth cannot tell whether or how it ran after the snapshot: run it again"

// PastError says that etcd's queue is older than what this manager saw:
// its last job ID (Seq) is below the highest this manager saw (Seen).
type PastError struct {
	// Prefix is the queue's key prefix.
	Prefix string
	// Seq is etcd's meta/seq; Seen the highest job ID this manager saw.
	Seq, Seen uint64
}

func (e *PastError) Error() string {
	return fmt.Sprintf("etcd holds the fleet's state from the past: its last job ID (%smeta/seq) is %d, but this manager saw job %d, "+
		"so etcd was restored from a snapshot or rolled back; the jobs issued since are gone from it and instances it records idle may still run them. "+
		"This manager refuses to lead rather than book new jobs beside them: stop every manager, run `berth state accept-restore --config FILE` on each manager's host "+
		"(it fails the jobs the snapshot cannot account for and makes every instance unknown, to be reset or replaced before any job), then start the managers",
		e.Prefix, e.Seq, e.Seen)
}

// seq reads meta/seq at the latest revision (0 when there is none).
func (b *etcdBackend) seq(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, etcdOpTimeout)
	defer cancel()
	resp, err := b.cli.Get(ctx, b.prefix+"meta/seq")
	if err != nil {
		return 0, fmt.Errorf("read the queue's last job ID: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	n, err := strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64)
	if err != nil {
		return 0, &CorruptError{Key: b.prefix + "meta/seq", Value: resp.Kvs[0].Value, Err: errors.New("the last job ID is not a number")}
	}
	return n, nil
}

// CheckPresent returns PastError when etcd's queue is older than what this
// manager saw (a restored snapshot, a rollback); nil for queue.db.
func (q *Queue) CheckPresent(ctx context.Context) error {
	b, ok := q.st.(*etcdBackend)
	if !ok {
		return nil
	}
	seq, err := b.seq(ctx)
	if err != nil {
		return err
	}
	if seen := b.floor.Load(); seq < seen {
		return &PastError{Prefix: b.prefix, Seq: seq, Seen: seen}
	}
	return nil
}

// Accepted is what AcceptPast did.
type Accepted struct {
	// Seq is etcd's last job ID before; Seen the highest this manager saw.
	Seq, Seen uint64
	// Missing are the jobs issued after the snapshot (Seq+1..Seen),
	// recorded failed; Stale the jobs the snapshot held queued or running,
	// failed.
	Missing, Stale int
}

// AcceptPast makes the queue of a restored etcd the present again, for
// `berth state accept-restore` while no manager runs: the jobs issued after
// the snapshot (above meta/seq, up to the highest ID this manager saw) are
// recorded failed with RestoreReason, so that their IDs answer and are
// never issued again; the jobs the snapshot holds queued or running are
// failed with it too (they may have run since: a job is never run twice);
// meta/seq is raised to the highest ID seen. Run again, it changes nothing.
func (q *Queue) AcceptPast(ctx context.Context) (Accepted, error) {
	b, ok := q.st.(*etcdBackend)
	if !ok {
		return Accepted{}, errors.New("accept a restore: the queue is not in etcd")
	}
	seq, err := b.seq(ctx)
	if err != nil {
		return Accepted{}, err
	}
	a := Accepted{Seq: seq, Seen: b.floor.Load()}
	now := time.Now().UTC()
	if a.Stale, err = q.failStale(now); err != nil {
		return a, err
	}
	per := uint64(etcdMaxOps - 2)
	for from := seq + 1; from <= a.Seen; from += per {
		to := min(a.Seen, from+per-1)
		n := 0
		err := q.update(func(tx tx) error {
			n = 0
			for id := from; id <= to; id++ {
				k := seqKey(id)
				if v, err := tx.get(bucketJobs, k); err != nil || v != nil {
					if err != nil {
						return err
					}
					continue // recorded by an earlier run
				}
				rec := &record{ID: strconv.FormatUint(id, 10), State: api.JobFailed, Failure: string(jobsource.FailureSystem),
					Reason: RestoreReason, CreatedAt: now, FinishedAt: &now}
				if err := saveRecord(tx, k, rec); err != nil {
					return err
				}
				n++
			}
			return raiseSeq(tx, to)
		})
		if err != nil {
			return a, q.storeError("record the jobs issued after the snapshot", err)
		}
		a.Missing += n
	}
	return a, nil
}

// raiseSeq sets meta/seq to n unless it is higher already.
func raiseSeq(tx tx, n uint64) error {
	v, err := tx.get(bucketMeta, []byte("seq"))
	if err != nil {
		return err
	}
	if cur, _ := strconv.ParseUint(string(v), 10, 64); v != nil && cur >= n {
		return nil
	}
	return tx.put(bucketMeta, []byte("seq"), []byte(strconv.FormatUint(n, 10)))
}

// failStale fails every job the restored queue holds queued or running
// with RestoreReason, in transactions of a few keys each.
func (q *Queue) failStale(now time.Time) (int, error) {
	failed := 0
	for _, bucket := range [][]byte{bucketRunning, bucketQueued} {
		var keys [][]byte
		if err := q.st.view(func(tx tx) error {
			keys = keys[:0]
			return tx.scan(bucket, false, func(k, _ []byte) (bool, error) {
				keys = append(keys, append([]byte(nil), k...))
				return true, nil
			})
		}); err != nil {
			return failed, err
		}
		per := max(1, etcdMaxOps/3)
		for len(keys) > 0 {
			chunk := keys[:min(per, len(keys))]
			keys = keys[len(chunk):]
			n := 0
			err := q.update(func(tx tx) error {
				n = 0
				for _, k := range chunk {
					rec, err := loadRecord(tx, k)
					if err != nil {
						return err
					}
					if rec != nil && (rec.State == api.JobRunning || rec.State == api.JobQueued) {
						rec.State, rec.Failure, rec.Reason, rec.FinishedAt = api.JobFailed, string(jobsource.FailureSystem), RestoreReason, &now
						if err := saveRecord(tx, k, rec); err != nil {
							return err
						}
						n++
					}
					if err := tx.del(bucket, k); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return failed, q.storeError("fail the jobs the snapshot holds queued or running", err)
			}
			failed += n
		}
	}
	return failed, nil
}

// RaiseSeqToSeen raises etcd's last job ID to the highest this manager
// saw, for `berth state new-fleet`: a new fleet's queue must not look
// older than what its managers saw (PastError), and its IDs go on above
// the old fleet's.
func (q *Queue) RaiseSeqToSeen() error {
	b, ok := q.st.(*etcdBackend)
	if !ok {
		return nil
	}
	seen := b.floor.Load()
	if err := q.update(func(tx tx) error { return raiseSeq(tx, seen) }); err != nil {
		return q.storeError("raise the queue's last job ID", err)
	}
	return nil
}
