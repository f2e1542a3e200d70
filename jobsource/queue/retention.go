package queue

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"

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
	var dropJobs, dropLogs []string
	err := q.update(func(tx *bolt.Tx) error {
		jobs, scripts := tx.Bucket(bucketJobs), tx.Bucket(bucketScripts)
		var keys [][]byte
		err := jobs.ForEach(func(k, v []byte) error {
			var rec record
			if decodeValue(v, &rec) != nil || !rec.State.Done() || rec.FinishedAt == nil {
				return nil
			}
			switch {
			case !jobsBefore.IsZero() && rec.FinishedAt.Before(jobsBefore):
				keys = append(keys, append([]byte(nil), k...))
				dropJobs = append(dropJobs, rec.ID)
			case !logsBefore.IsZero() && rec.FinishedAt.Before(logsBefore):
				dropLogs = append(dropLogs, rec.ID)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := jobs.Delete(k); err != nil {
				return err
			}
			if err := scripts.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return res, q.storeError("prune finished jobs", err)
	}
	res.Jobs = len(dropJobs)
	for _, id := range dropJobs {
		q.removeLog(id)
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

// removeLog deletes job id's log file and reports whether there was one.
func (q *Queue) removeLog(id string) bool {
	err := os.Remove(q.logPath(id))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		q.log.Warn("cannot delete a pruned job's log", "job", id, "err", err)
	}
	return err == nil
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
