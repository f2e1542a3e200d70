package queue

import (
	"fmt"
	"net/http"
	"time"

	"github.com/berth-ci/berth/api"
)

// Prune deletes finished jobs that ended before jobsBefore, with their
// scripts and logs, and the logs of finished jobs that ended before
// logsBefore. A zero time leaves that kind alone. Queued and running jobs
// are never touched. Without it job history and logs grow for ever (issue
// 19); the manager prunes by job_retention and log_retention every hour,
// `berth jobs prune` on demand. Pruned IDs are not reused (see ids.go).
func (q *Queue) Prune(jobsBefore, logsBefore time.Time) (api.PruneResult, error) {
	var res api.PruneResult
	var keys [][]byte
	var dropLogs []string
	err := q.st.view(func(tx tx) error {
		keys, dropLogs = nil, nil
		return tx.scan(bucketJobs, false, func(k, v []byte) (bool, error) {
			var rec record
			if decodeValue(v, &rec) != nil || !rec.State.Done() || rec.FinishedAt == nil {
				return true, nil
			}
			switch {
			case !jobsBefore.IsZero() && rec.FinishedAt.Before(jobsBefore):
				keys = append(keys, append([]byte(nil), k...))
			case !logsBefore.IsZero() && rec.FinishedAt.Before(logsBefore):
				dropLogs = append(dropLogs, rec.ID)
			}
			return true, nil
		})
	})
	if err != nil {
		return res, q.storeError("prune finished jobs", err)
	}
	dropJobs, err := q.pruneJobs(keys, jobsBefore)
	for _, id := range dropJobs {
		q.removeLog(id)
	}
	res.Jobs = len(dropJobs)
	if err != nil {
		return res, q.storeError("prune finished jobs", err)
	}
	for _, id := range dropLogs {
		if q.removeLog(id) {
			res.Logs++
		}
	}
	if res.Jobs > 0 || res.Logs > 0 {
		q.log.Info("pruned finished jobs", "jobs_deleted", res.Jobs, "logs_deleted", res.Logs,
			"jobs_before", jobsBefore.UTC().Format(time.RFC3339), "logs_before", logsBefore.UTC().Format(time.RFC3339))
		q.changed.fire()
	}
	return res, nil
}

// pruneJobs deletes the jobs under keys that still ended before before, in
// as few transactions as the store allows (one for bbolt; etcd bounds the
// keys of one), and returns the IDs it deleted.
func (q *Queue) pruneJobs(keys [][]byte, before time.Time) ([]string, error) {
	per := len(keys)
	if m := q.st.maxOps(); m > 0 {
		per = max(1, m/2) // a record and a script per job
	}
	var dropped []string
	for len(keys) > 0 {
		n := min(per, len(keys))
		chunk := keys[:n]
		keys = keys[n:]
		var ids []string
		err := q.update(func(tx tx) error {
			ids = ids[:0]
			for _, k := range chunk {
				rec, err := loadRecord(tx, k)
				if err != nil || rec == nil || !rec.State.Done() || rec.FinishedAt == nil || !rec.FinishedAt.Before(before) {
					continue // changed or damaged meanwhile: left for the next prune
				}
				if err := tx.del(bucketJobs, k); err != nil {
					return err
				}
				if err := tx.del(bucketScripts, k); err != nil {
					return err
				}
				if rec.IdemKey != "" {
					if err := tx.del(bucketIdem, []byte(rec.IdemKey)); err != nil {
						return err
					}
				}
				ids = append(ids, rec.ID)
			}
			return nil
		})
		if err != nil {
			return dropped, err
		}
		dropped = append(dropped, ids...)
	}
	return dropped, nil
}

// removeLog deletes job id's log and reports whether there was one.
func (q *Queue) removeLog(id string) bool {
	ok, err := q.st.removeLog(id)
	if err != nil {
		q.log.Warn("cannot delete a pruned job's log", "job", id, "err", err)
	}
	return ok
}

// handlePrune serves POST /api/v1/jobs/prune?jobs_older_than=D&logs_older_than=D
// for the admin.
func (q *Queue) handlePrune(w http.ResponseWriter, r *http.Request) {
	if !api.PrincipalFrom(r.Context()).Admin {
		api.WriteError(w, http.StatusForbidden, "only the admin may prune jobs: use the admin token (berth token)")
		return
	}
	before := func(key string) (time.Time, error) {
		s := r.URL.Query().Get(key)
		if s == "" || s == "0" || s == "0s" {
			return time.Time{}, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return time.Time{}, fmt.Errorf("%s=%q is not a duration such as 720h", key, s)
		}
		return time.Now().Add(-d), nil
	}
	jobsBefore, err := before("jobs_older_than")
	if err == nil {
		var logsBefore time.Time
		if logsBefore, err = before("logs_older_than"); err == nil {
			res, perr := q.Prune(jobsBefore, logsBefore)
			if perr != nil {
				q.writeError(w, perr)
				return
			}
			api.WriteJSON(w, http.StatusOK, res)
			return
		}
	}
	api.WriteError(w, http.StatusBadRequest, err.Error())
}
