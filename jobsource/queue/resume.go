package queue

import (
	"bytes"
	"context"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
)

var _ jobsource.Resumer = (*Queue)(nil)

// RequestResume takes the oldest queued job that resumes an environment for
// which runnable(key) is true, and marks it running; (nil, nil) when there
// is none. Such a job needs no new booking: its environment's own slot
// serves it, so the manager asks for it even when every slot is taken
// (issue 9: parked environments filling max_instances deadlocked resumes).
// Plain jobs keep their order; only resume jobs may pass them.
func (q *Queue) RequestResume(ctx context.Context, runnable func(envKey string) bool) (jobsource.Job, error) {
	return q.take(ctx, func(tx tx) ([]byte, error) {
		var found []byte
		err := tx.scan(bucketQueued, false, func(k, v []byte) (bool, error) {
			// The index marks resume jobs: decode only those (a burst
			// of thousands of plain jobs made every call decode them all).
			if !bytes.Equal(v, queuedResume) {
				return true, nil
			}
			rec, err := peekRecord(tx, k)
			if err != nil || rec == nil || rec.State != api.JobQueued || rec.Resume == "" {
				return true, nil // take reports broken entries when it meets them first
			}
			if runnable(rec.Resume) {
				found = append([]byte(nil), k...)
				return false, nil
			}
			return true, nil
		})
		return found, err
	})
}

// Changed returns a channel closed at the next change of any job, such as a
// submit. The manager waits on it (with the fleet's) while it cannot book a
// slot, so that a resume job submitted meanwhile starts at once.
func (q *Queue) Changed() <-chan struct{} { return q.changed.wait() }

// peekRecord is loadRecord for a record only looked at to choose a job:
// takeIn reads the chosen one again, for real, before it changes it.
func peekRecord(tx tx, k []byte) (*record, error) {
	v, err := tx.peek(bucketJobs, k)
	if err != nil || v == nil {
		return nil, err
	}
	var rec record
	if err := decodeValue(v, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}
