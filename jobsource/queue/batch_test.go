package queue_test

import (
	"context"
	"testing"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
)

// RequestBatch takes the oldest plain jobs in order, at most n, marks them
// running, and stops at a job that resumes an environment: that one is
// taken alone (Request or RequestResume), so plain jobs never pass it and
// two resumes of one environment are never taken together.
func TestRequestBatchTakesPlainJobsInOrderUpToAResumeJob(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		var ids []string
		for _, resume := range []string{"", "", "", "", "env-a", "", "env-a"} {
			j, err := q.Submit(api.JobRequest{Script: "true", Resume: resume})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		ctx := context.Background()

		jobs := requestBatch(t, q, 3)
		wantIDs(t, "first batch of 3", jobs, ids[0:3])
		for _, j := range jobs {
			if got, err := q.Get(j.ID()); err != nil || got.State != api.JobRunning {
				t.Fatalf("job %s after RequestBatch: %+v, %v; want running", j.ID(), got, err)
			}
		}
		wantIDs(t, "second batch, stopped by the resume job", requestBatch(t, q, 10), ids[3:4])
		wantIDs(t, "batch with a resume job at the head", requestBatch(t, q, 10), nil)

		j, err := q.Request(ctx)
		if err != nil || j == nil || j.ID() != ids[4] {
			t.Fatalf("Request = %v, %v; want the resume job %s", j, err, ids[4])
		}
		wantIDs(t, "batch after the resume job", requestBatch(t, q, 10), ids[5:6])
		if n, err := q.Len(); n != 0 || err != nil {
			t.Fatalf("Len = %d, %v; want 0 plain jobs left", n, err)
		}
	})
}

// Jobs taken in a batch are ordinary jobs: they finish like any other, and
// an empty queue gives an empty batch.
func TestRequestBatchJobsFinish(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		for range 5 {
			if _, err := q.Submit(api.JobRequest{Script: "true"}); err != nil {
				t.Fatal(err)
			}
		}
		jobs := requestBatch(t, q, 100)
		if len(jobs) != 5 {
			t.Fatalf("RequestBatch(100) took %d jobs; want all 5", len(jobs))
		}
		for _, j := range jobs {
			if err := j.Finish(context.Background(), jobsource.Result{ExitCode: 0}); err != nil {
				t.Fatal(err)
			}
			if got, _ := q.Get(j.ID()); got.State != api.JobSuccess {
				t.Fatalf("job %s = %s after Finish; want succeeded", j.ID(), got.State)
			}
		}
		wantIDs(t, "batch from an empty queue", requestBatch(t, q, 10), nil)
	})
}

func requestBatch(t *testing.T, q interface {
	RequestBatch(context.Context, int) ([]jobsource.Job, error)
}, n int) []jobsource.Job {
	t.Helper()
	jobs, err := q.RequestBatch(context.Background(), n)
	if err != nil {
		t.Fatalf("RequestBatch(%d): %v", n, err)
	}
	return jobs
}

func wantIDs(t *testing.T, what string, jobs []jobsource.Job, want []string) {
	t.Helper()
	var got []string
	for _, j := range jobs {
		got = append(got, j.ID())
	}
	if len(got) != len(want) {
		t.Fatalf("%s: took %v; want %v", what, got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: took %v; want %v", what, got, want)
		}
	}
}
