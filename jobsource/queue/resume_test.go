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
}
