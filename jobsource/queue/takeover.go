package queue

import (
	"fmt"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
)

// TakeOver is what a manager that has just become the leader does to an
// etcd queue before it takes jobs: the jobs the previous leader was
// running cannot be finished by it any more (its writes are fenced), and
// their executors died or run on unwatched, so they are marked failed
// with FailoverReason, as Open marks a crashed berth's jobs failed with
// RestartReason (docs/semantics.md, Restart: failed, not requeued, since
// a job's script may have had effects; its submitter decides to run it
// again). Jobs this manager itself still runs are kept. Queued jobs stay
// queued, in order. The failed jobs are returned and added to Interrupted,
// so that RecoverResult can still give back the result of a job whose
// environment was parked.
//
// The first take of each term runs it if the caller did not. For the bbolt
// queue it does nothing: Open did it.
func (q *Queue) TakeOver() ([]api.Job, error) {
	if q.fence == nil {
		return nil, nil
	}
	_, rev, ok := q.fence()
	if !ok {
		return nil, fmt.Errorf("take the queue over: %w", ErrNotLeader)
	}
	q.takeoverMu.Lock()
	defer q.takeoverMu.Unlock()
	failed, err := q.failOthers()
	if err != nil {
		return failed, q.storeError("take the queue over (fail the previous leader's jobs)", err)
	}
	q.mu.Lock()
	q.interrupted = append(q.interrupted, failed...)
	q.tookOver = rev
	q.mu.Unlock()
	for _, j := range failed {
		q.appendNote(j.ID, FailoverReason)
		q.log.Warn("job failed: "+FailoverReason, "job", j.ID, "instance", j.Instance)
	}
	if len(failed) > 0 {
		q.changed.fire()
	}
	q.log.Info("queue taken over", "term_revision", rev, "jobs_failed", len(failed))
	return failed, nil
}

// failOthers fails the running jobs that are not live in this process,
// in transactions of at most maxOps keys.
func (q *Queue) failOthers() ([]api.Job, error) {
	var keys [][]byte
	if err := q.st.view(func(tx tx) error {
		keys = keys[:0]
		return tx.scan(bucketRunning, false, func(k, _ []byte) (bool, error) {
			keys = append(keys, append([]byte(nil), k...))
			return true, nil
		})
	}); err != nil {
		return nil, err
	}
	per := len(keys)
	if m := q.st.maxOps(); m > 0 {
		per = max(1, m/3) // a record read and written, an index entry deleted
	}
	var failed []api.Job
	now := time.Now().UTC()
	for len(keys) > 0 {
		chunk := keys[:min(per, len(keys))]
		keys = keys[len(chunk):]
		var got []api.Job
		err := q.leaderUpdate(func(tx tx) error {
			got = got[:0]
			for _, k := range chunk {
				if q.liveJob(jobID(k)) != nil {
					continue
				}
				rec, err := loadRecord(tx, k)
				if err != nil {
					return err
				}
				if rec != nil && rec.State == api.JobRunning {
					rec.State, rec.Failure, rec.Reason, rec.FinishedAt = api.JobFailed, string(jobsource.FailureSystem), FailoverReason, &now
					if err := saveRecord(tx, k, rec); err != nil {
						return err
					}
					got = append(got, rec.apiJob(nil))
				}
				if err := tx.del(bucketRunning, k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return failed, err
		}
		failed = append(failed, got...)
	}
	return failed, nil
}

// takeOverOnce runs TakeOver once per term before the leader's first take.
func (q *Queue) takeOverOnce() error {
	if q.fence == nil {
		return nil
	}
	_, rev, ok := q.fence()
	if !ok {
		return ErrNotLeader
	}
	q.mu.Lock()
	done := q.tookOver == rev
	q.mu.Unlock()
	if done {
		return nil
	}
	_, err := q.TakeOver()
	return err
}
