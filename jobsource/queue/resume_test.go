package queue_test

import (
	"context"
	"testing"

	"github.com/berth-ci/berth/api"
)

// RequestResume hands out, oldest first, only jobs that resume an
// environment the caller says is runnable; plain jobs keep their order for
// Request.
func TestRequestResumeTakesOnlyRunnableResumeJobs(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		submit := func(resume string) string {
			j, err := q.Submit(api.JobRequest{Script: "true", Resume: resume})
			if err != nil {
				t.Fatal(err)
			}
			return j.ID
		}
		plain1 := submit("")
		submit("busy-key")
		free := submit("free-key")
		submit("")

		ctx := context.Background()
		runnable := func(k string) bool { return k != "busy-key" }
		j, err := q.RequestResume(ctx, runnable)
		if err != nil || j == nil || j.ID() != free {
			t.Fatalf("RequestResume = %v, %v; want job %s (the busy environment's job must wait)", j, err, free)
		}
		if j, err := q.RequestResume(ctx, runnable); j != nil || err != nil {
			t.Fatalf("second RequestResume = %v, %v; want nothing", j, err)
		}
		if j, err := q.Request(ctx); err != nil || j == nil || j.ID() != plain1 {
			t.Fatalf("Request = %v, %v; want the oldest job %s", j, err, plain1)
		}
	})
}

// Len, the demand the scaler sees, counts only queued jobs that need a new
// booking: a job that resumes an environment runs on that environment's
// own instance.
func TestLenLeavesOutResumeJobs(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		for _, resume := range []string{"", "env-a", "", "env-b", ""} {
			if _, err := q.Submit(api.JobRequest{Script: "true", Resume: resume}); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := q.Len(); n != 3 || err != nil {
			t.Fatalf("Len = %d, %v; want the 3 plain jobs", n, err)
		}
		if j, err := q.Request(context.Background()); err != nil || j == nil {
			t.Fatalf("Request = %v, %v", j, err)
		}
		if n, err := q.Len(); n != 2 || err != nil {
			t.Fatalf("Len after one job was taken = %d, %v; want 2", n, err)
		}
	})
}
