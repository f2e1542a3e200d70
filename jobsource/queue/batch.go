package queue

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/berth-ci/berth/jobsource"
)

var _ jobsource.BatchRequester = (*Queue)(nil)

// RequestBatch takes up to n of the oldest queued jobs in one commit and
// marks them running. It stops at the first job that resumes an
// environment: that job is left for Request or RequestResume, which take
// one at a time, so that two jobs resuming the same environment are never
// taken together and plain jobs never pass a resume job. With no plain job
// at the head of the queue it returns no job and no error.
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
	err := q.update(func(tx *bolt.Tx) error {
		got = got[:0]
		c := tx.Bucket(bucketQueued).Cursor()
		// Deleting under a cursor moves it: seek past the last key seen instead.
		var after []byte
		for len(got) < n {
			k, v := c.First()
			if after != nil {
				k, v = c.Seek(after)
				if k != nil && bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			if k == nil || bytes.Equal(v, queuedResume) {
				return nil
			}
			key := append([]byte(nil), k...)
			after = key
			rec, sc, err := q.takeIn(tx, key, now)
			if err != nil {
				return err
			}
			if rec != nil {
				got = append(got, taken{key, rec, sc})
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
