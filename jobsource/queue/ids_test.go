package queue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
)

// runWithOutput submits a job, runs it and writes out to its log.
func runWithOutput(t *testing.T, dir, out string) string {
	t.Helper()
	q := openQueue(t, dir)
	j, err := q.Submit(api.JobRequest{Script: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	job := request(t, q)
	fmt.Fprint(job.Log(), out)
	if err := job.Finish(context.Background(), jobsource.Result{}); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

// Issue 19, failure 3: after queue.db is put back from an older copy, or
// moved aside, new jobs must not take the IDs of jobs already run, nor
// their logs.
func TestJobIDsNeverRepeatAfterTheQueueIsRestoredOrMovedAside(t *testing.T) {
	for _, tc := range []struct {
		name    string
		recover func(t *testing.T, path, older string)
	}{
		{"restored from an older copy", func(t *testing.T, path, older string) {
			if err := os.Rename(older, path); err != nil {
				t.Fatal(err)
			}
		}},
		{"moved aside", func(t *testing.T, path, _ string) {
			os.Remove(path + ".bak")
			if err := os.Rename(path, path+".aside"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "queue")
			path := filepath.Join(dir, "queue.db")
			runWithOutput(t, dir, "first job's secret\n")
			older := path + ".older"
			data, _ := os.ReadFile(path)
			os.WriteFile(older, data, 0o600)
			last := runWithOutput(t, dir, "second job's secret\n")

			tc.recover(t, path, older)
			q := openQueue(t, dir)
			j, err := q.Submit(api.JobRequest{Script: "echo new"})
			if err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.Atoi(j.ID)
			if l, _ := strconv.Atoi(last); n <= l {
				t.Fatalf("new job got ID %s after the recovery; jobs up to %s were already issued", j.ID, last)
			}
			if data, err := os.ReadFile(filepath.Join(dir, "logs", j.ID+".log")); err == nil && len(data) > 0 {
				t.Fatalf("the new job's log already holds output:\n%s", data)
			}
		})
	}
}

// A log file found for a new job's ID is stale (written behind the
// queue's back after it opened): it is removed rather than appended to.
func TestStaleLogFileIsNotInheritedByANewJob(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "queue")
	q := openQueue(t, dir)
	os.WriteFile(filepath.Join(dir, "logs", "1.log"), []byte("old output\n"), 0o600)
	j, err := q.Submit(api.JobRequest{Script: "echo new"})
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != "1" {
		t.Fatalf("first job got ID %s", j.ID)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "logs", j.ID+".log")); err == nil && len(data) > 0 {
		t.Fatalf("new job %s inherited a log:\n%s", j.ID, data)
	}
}

// Jobs that were only queued have no log file to count from: their IDs are
// recorded beside queue.db by the submit itself (once per shared commit,
// not per job), so a restored queue.db does not hand them out again.
func TestQueuedJobIDsNeverRepeatAfterTheQueueIsRestored(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "queue")
	path := filepath.Join(dir, "queue.db")
	q := openQueue(t, dir)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	older, _ := os.ReadFile(path)
	q = openQueue(t, dir)
	var last api.Job
	for range 3 {
		j, err := q.Submit(api.JobRequest{Script: "echo"})
		if err != nil {
			t.Fatal(err)
		}
		last = j
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, older, 0o600); err != nil {
		t.Fatal(err)
	}
	q = openQueue(t, dir)
	j, err := q.Submit(api.JobRequest{Script: "echo new"})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(j.ID)
	if l, _ := strconv.Atoi(last.ID); n <= l {
		t.Fatalf("new job got ID %s after queue.db was restored; jobs up to %s were already submitted", j.ID, last.ID)
	}
}
