package queue_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
)

// Issue 19: job history and logs grew for ever. Prune deletes finished jobs
// past job_retention with their logs, and logs past log_retention, and
// never touches a queued job; IDs of pruned jobs are not given again.
func TestPruneDeletesOldFinishedJobsAndLogsOnly(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		dir := t.TempDir()
		q := openQueue(t, dir)
		var ids []string
		for range 3 {
			j, err := q.Submit(api.JobRequest{Script: "echo"})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		for range 2 {
			job := request(t, q)
			fmt.Fprintln(job.Log(), "output")
			if err := job.Finish(context.Background(), jobsource.Result{}); err != nil {
				t.Fatal(err)
			}
		}
		logFile := func(id string) string { return filepath.Join(dir, "logs", id+".log") }
		later := time.Now().Add(time.Hour)

		// Logs only: both finished jobs stay, their logs go.
		res, err := q.Prune(time.Time{}, later)
		if err != nil || res.Jobs != 0 || res.Logs != 2 {
			t.Fatalf("prune logs: %+v %v, want 0 jobs and 2 logs", res, err)
		}
		if _, err := os.Stat(logFile(ids[0])); err == nil {
			t.Error("the log of a finished job past log_retention is still there")
		}
		if list, _ := q.List("", 0); len(list) != 3 {
			t.Fatalf("after pruning logs %d jobs are listed, want 3", len(list))
		}

		res, err = q.Prune(later, time.Time{})
		if err != nil || res.Jobs != 2 {
			t.Fatalf("prune jobs: %+v %v, want 2 jobs", res, err)
		}
		list, _ := q.List("", 0)
		if len(list) != 1 || list[0].ID != ids[2] || list[0].State != api.JobQueued {
			t.Fatalf("after pruning: %+v, want only the queued job %s", list, ids[2])
		}
		j, err := q.Submit(api.JobRequest{Script: "echo"})
		if err != nil || j.ID == ids[0] || j.ID == ids[1] {
			t.Fatalf("job after pruning got ID %s (%v); pruned IDs must not come back", j.ID, err)
		}
	})
}

// Only the admin may prune: a submitter gets 403 and nothing is deleted.
func TestPruneIsRefusedToASubmitter(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		j, _ := q.Submit(api.JobRequest{Script: "echo"})
		job := request(t, q)
		job.Finish(context.Background(), jobsource.Result{})
		h := q.Handler()
		req := httptest.NewRequest(http.MethodPost, "/api/v1/jobs/prune?jobs_older_than=1ns", nil)
		req = req.WithContext(api.WithPrincipal(req.Context(), api.Principal{Name: "alice"}))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Fatalf("prune by a submitter: %d %s, want 403", rec.Code, rec.Body)
		}
		if _, err := q.Get(j.ID); err != nil {
			t.Errorf("the job was deleted by a refused prune: %v", err)
		}
	})
}
