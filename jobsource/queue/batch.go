package queue

import (
	"bytes"
	"context"
	"time"

	"github.com/berth-ci/berth/jobsource"
)

var _ jobsource.BatchRequester = (*Queue)(nil)

// RequestBatch takes up to n of the oldest queued jobs in one commit and
// marks them running. It stops at the first job that resumes an
// environment: that job is left for Request or RequestResume, which take
// one at a time, so that two jobs resuming the same environment are never
// taken together and plain jobs never pass a resume job. With no plain job
// at the head of the queue it returns no job and no error. With etcd it
// takes at most 40 at once (etcd's bound on the keys of one transaction);
// callers ask again.
//
// One commit for a burst instead of one per job: with 1,000 jobs queued the
// job loop's take was the serial step between submit and running (issue 23).
func (q *Queue) RequestBatch(ctx context.Context, n int) ([]jobsource.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if q.isClosed() {
		return nil, ErrClosed
	}
	type taken struct {
		key []byte
		rec *record
		sc  *script
	}
	var got []taken
	now := time.Now().UTC()
	if err := q.takeOverOnce(); err != nil {
		return nil, q.storeError("take jobs from the queue", err)
	}
	if m := q.st.maxOps(); m > 0 {
		n = min(n, max(1, m/3)) // three keys written per job
	}
	err := q.leaderUpdate(func(tx tx) error {
		got = got[:0]
		// A scan does not see the transaction's own writes: skip the
		// keys already handled, and scan again while damaged or
		// dangling entries left the batch short.
		done := map[string]bool{}
		for len(got) < n {
			keys, err := plainHead(tx, n-len(got), done)
			if err != nil || len(keys) == 0 {
				return err
			}
			for _, key := range keys {
				done[string(key)] = true
				rec, sc, err := q.takeIn(tx, key, now)
				if err != nil {
					return err
				}
				if rec != nil {
					got = append(got, taken{key, rec, sc})
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, q.storeError("take jobs from the queue", err)
	}
	jobs := make([]jobsource.Job, 0, len(got))
	for _, t := range got {
		j, err := q.hand(t.key, t.rec, t.sc)
		if err != nil {
			// Closed meanwhile: the jobs not handed out stay "running"
			// in queue.db and the next start fails them as interrupted.
			return jobs, err
		}
		jobs = append(jobs, j)
	}
	if len(jobs) > 0 {
		q.changed.fire()
	}
	return jobs, nil
}

// plainHead returns up to n keys of the queued index from its head, up to
// the first job that resumes an environment, leaving out the keys in skip.
func plainHead(tx tx, n int, skip map[string]bool) ([][]byte, error) {
	var keys [][]byte
	err := tx.scan(bucketQueued, false, func(k, v []byte) (bool, error) {
		if skip[string(k)] {
			return true, nil
		}
		if bytes.Equal(v, queuedResume) {
			return false, nil
		}
		keys = append(keys, append([]byte(nil), k...))
		return len(keys) < n, nil
	})
	return keys, err
}
