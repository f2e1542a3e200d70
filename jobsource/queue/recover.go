package queue

import (
	"fmt"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
)

// RecoverResult records the result of a job that Open marked failed with
// RestartReason although it had ended: berth parked its environment (state.db
// holds the key) and was killed before the job's record said so (issue 19,
// failure 5). The record then gets the result and the environment key the
// job would have had, and the key's owner is recorded so that the job's
// submitter can resume it. A job in any other state is left alone.
func (q *Queue) RecoverResult(id string, r jobsource.Result) (bool, error) {
	k, ok := idKey(id)
	if !ok {
		return false, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	recovered := false
	err := q.update(func(tx tx) error {
		recovered = false
		rec, err := loadRecord(tx, k)
		if err != nil || rec == nil {
			return err
		}
		if rec.State != api.JobFailed || (rec.Reason != RestartReason && rec.Reason != FailoverReason) || rec.EnvKey != "" {
			return nil
		}
		finished := time.Now().UTC()
		if rec.FinishedAt != nil {
			finished = *rec.FinishedAt
		}
		applyResult(rec, r, finished)
		if err := saveRecord(tx, k, rec); err != nil {
			return err
		}
		recovered = true
		return recordEnvOwner(tx, rec)
	})
	if err != nil {
		return false, q.storeError("recover the result of job "+id, err)
	}
	if recovered {
		q.mu.Lock()
		for i, j := range q.interrupted {
			if j.ID == id {
				q.interrupted = append(q.interrupted[:i], q.interrupted[i+1:]...)
				break
			}
		}
		q.mu.Unlock()
		q.appendNote(id, "berth stopped after it parked this job's environment; its result and environment key were recovered at the next start")
		q.log.Warn("job result recovered from its parked environment", "job", id, "env_key", r.EnvKey, "exit_code", r.ExitCode)
		q.changed.fire()
	}
	return recovered, nil
}
