package queue_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
)

// TestLostLogFailsTheJob writes a job's log to a device that is always
// full (/dev/full, as a full disk would) and checks that the job does not
// end as a success, says why, and that the queue reports itself unhealthy.
func TestLostLogFailsTheJob(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	dir := t.TempDir()
	q := openQueue(t, dir)
	_, c := serve(t, q)
	sub := submit(t, c, api.JobRequest{Script: "echo hello"})
	if err := os.Symlink("/dev/full", filepath.Join(dir, "logs", sub.ID+".log")); err != nil {
		t.Fatal(err)
	}
	j := request(t, q)
	if n, err := j.Log().Write([]byte("hello\n")); n != 6 || err != nil {
		t.Fatalf("Write = %d, %v; the log must absorb output", n, err)
	}
	if err := q.Health(); err == nil {
		t.Error("the queue reports healthy while job output is being lost")
	}
	if err := j.Finish(context.Background(), jobsource.Result{}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Job(context.Background(), sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != api.JobFailed || !strings.Contains(got.Reason, "could not store its output") || !strings.Contains(got.Reason, "no space left") {
		t.Errorf("job with a lost log ended %s: %q", got.State, got.Reason)
	}
}

// Issue 43, item 4: a job's log file that cannot be created (a file
// system out of inodes fails the create with bytes free; here a directory
// stands in its place) makes the queue unhealthy at once, as a failed
// write does; before, /healthz said ok and the job failed only at its end.
func TestLogThatCannotBeCreatedMakesTheQueueUnhealthy(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, dir)
	_, c := serve(t, q)
	sub := submit(t, c, api.JobRequest{Script: "echo hello"})
	if err := os.Mkdir(filepath.Join(dir, "logs", sub.ID+".log"), 0o700); err != nil {
		t.Fatal(err)
	}
	j := request(t, q)
	if err := q.Health(); err == nil || !strings.Contains(err.Error(), "open log") {
		t.Errorf("Health with a job's log not created: %v, want the failure", err)
	}
	if err := j.Finish(context.Background(), jobsource.Result{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Job(context.Background(), sub.ID); got.State != api.JobFailed {
		t.Errorf("job without a log ended %s: %q", got.State, got.Reason)
	}
}
