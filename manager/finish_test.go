package manager

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/etcdtest"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/jobsource/queue"
)

// fullDiskJob is a real queue job whose first results meet a full disk,
// as queue.Job.Finish reports it (ErrNoSpace): a full disk cannot be made
// to hit exactly the result's write, since bbolt reuses allocated pages.
type fullDiskJob struct {
	*queue.Job
	fails, calls int
}

func (j *fullDiskJob) Finish(ctx context.Context, r jobsource.Result) error {
	j.calls++
	if j.calls <= j.fails {
		return fmt.Errorf("finish job %s: record the result: %w in /state/queue (write: no space left on device)", j.ID(), queue.ErrNoSpace)
	}
	return j.Job.Finish(ctx, r)
}

// Issue 19, failure 4: a job result that cannot be saved (disk full) is
// written again until it is, so the job does not stay "running" and is not
// failed by the next start although it exited 0.
func TestJobResultIsSavedOnceTheDiskHasRoomAgain(t *testing.T) {
	q, err := queue.Open(filepath.Join(t.TempDir(), "queue"), queue.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	sub, err := q.Submit(api.JobRequest{Script: "true"})
	if err != nil {
		t.Fatal(err)
	}
	taken, err := q.Request(context.Background())
	if err != nil || taken == nil {
		t.Fatalf("request: %v %v", taken, err)
	}
	job := &fullDiskJob{Job: taken.(*queue.Job), fails: 3}
	var logs bytes.Buffer
	m := &Manager{opts: Options{FinishRetryMax: time.Millisecond}}
	m.finishJob(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), job, jobsource.Result{ExitCode: 0})

	if job.calls != 4 {
		t.Errorf("Finish called %d times, want 3 failures and 1 success", job.calls)
	}
	if j, _ := q.Get(sub.ID); j.State != api.JobSuccess {
		t.Errorf("job is %s after the disk had room again, want success", j.State)
	}
	if !strings.Contains(logs.String(), "retrying until it can be written") || !strings.Contains(logs.String(), "attempts=4") {
		t.Errorf("log does not tell of the retries:\n%s", logs.String())
	}
}

// A result refused for a reason no retry fixes is not retried.
func TestJobResultIsNotRetriedWhenTheJobIsGone(t *testing.T) {
	q, err := queue.Open(filepath.Join(t.TempDir(), "queue"), queue.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	q.Submit(api.JobRequest{Script: "true"})
	taken, _ := q.Request(context.Background())
	job := &fullDiskJob{Job: taken.(*queue.Job)}
	m := &Manager{opts: Options{FinishRetryMax: time.Millisecond}}
	m.finishJob(context.Background(), slog.New(slog.DiscardHandler), job, jobsource.Result{})
	m.finishJob(context.Background(), slog.New(slog.DiscardHandler), job, jobsource.Result{})
	if job.calls != 2 {
		t.Errorf("Finish called %d times, want once per report (the second one meets ErrFinished)", job.calls)
	}
}

// Issue 43: etcd restored from a snapshot taken before the job was
// submitted holds no such job. Its result can be recorded by no term, so
// it is given up at once; before, it was tried again until the shutdown
// grace ended, and a SIGTERMed manager did not stop.
func TestJobResultIsGivenUpWhenEtcdLostTheJob(t *testing.T) {
	cli := etcdtest.Start(t, 1).Client(t)
	var leads atomic.Bool
	leads.Store(true)
	won, err := cli.Put(context.Background(), "/election/a", "a")
	if err != nil {
		t.Fatal(err)
	}
	fence := func() (string, int64, bool) { return "/election/a", won.Header.Revision, leads.Load() }
	quiet := queue.WithLogger(slog.New(slog.DiscardHandler))
	ran, err := queue.OpenEtcd(context.Background(), cli, "/ran/queue/", fence, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer ran.Close()
	if _, err := ran.Submit(api.JobRequest{Script: "true"}); err != nil {
		t.Fatal(err)
	}
	taken, err := ran.Request(context.Background())
	if err != nil || taken == nil {
		t.Fatalf("request: %v %v", taken, err)
	}
	leads.Store(false) // the term ended: Finish is refused
	restored, err := queue.OpenEtcd(context.Background(), cli, "/restored/queue/", fence, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	m := &Manager{queue: restored, opts: Options{FinishRetryMax: time.Millisecond}}
	// A guard, not a timing assertion: before, only its end stopped the retries.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var logs bytes.Buffer
	m.finishJob(ctx, slog.New(slog.NewTextHandler(&logs, nil)), taken, jobsource.Result{})
	if ctx.Err() != nil {
		t.Errorf("the result was retried until the manager stopped (%v): want it given up at once", ctx.Err())
	}
	if !strings.Contains(logs.String(), "etcd no longer holds the job") {
		t.Errorf("the log does not say why the result was given up:\n%s", logs.String())
	}
}
