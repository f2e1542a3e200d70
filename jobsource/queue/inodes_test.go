package queue_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
)

// fewInodes mounts a tmpfs with plenty of bytes and few inodes at dir
// (needs CAP_SYS_ADMIN; the test is skipped without it).
func fewInodes(t *testing.T, dir string, inodes int) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=64m,nr_inodes=%d,mode=0700", inodes)); err != nil {
		t.Skipf("cannot mount a tmpfs with few inodes (needs root with CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// fillInodes creates empty files under dir/filler until the file system
// has no inode left, and returns how many it made.
func fillInodes(t *testing.T, dir string) int {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	if err := os.Mkdir(filler, 0o700); err != nil {
		t.Fatal(err)
	}
	for n := 0; ; n++ {
		f, err := os.Create(filepath.Join(filler, fmt.Sprint(n)))
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the inodes: %v", err)
			}
			return n
		}
		f.Close()
	}
}

// Issue 43, item 4, on a real file system out of inodes with bytes free:
// queue.db takes writes, but no job log can be created. Health says so
// before any job fails, a submit is refused with 507 and queues nothing,
// a job started meanwhile fails for its lost log, and once files are
// deleted Health is nil and submits work again with no restart. On main
// Health stayed nil and every submit was accepted.
func TestOutOfInodesRefusesSubmitsUntilFilesAreDeleted(t *testing.T) {
	dir := t.TempDir()
	fewInodes(t, dir, 64)
	q := openQueue(t, dir)
	_, c := serve(t, q)
	ctx := context.Background()
	early := submit(t, c, api.JobRequest{Script: "echo queued before"})
	if err := q.Health(); err != nil {
		t.Fatalf("Health before the inodes ran out: %v", err)
	}
	n := fillInodes(t, dir)
	t.Logf("%d empty files took the last inodes", n)

	herr := q.Health()
	if herr == nil || !strings.Contains(herr.Error(), "no file can be created in "+filepath.Join(dir, "logs")) {
		t.Fatalf("Health with no inode free: %v, want the log directory named", herr)
	}
	_, err := c.Submit(ctx, api.JobRequest{Script: "echo refused"})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusInsufficientStorage || !strings.Contains(ae.Message, "delete files there") {
		t.Fatalf("submit with no inode free: %v, want 507 saying what to do", err)
	}
	list, err := c.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Errorf("%d jobs after the refused submit, want only the one queued before", len(list))
	}

	// The job queued before cannot have a log: it fails, saying why.
	j := request(t, q)
	if err := j.Finish(ctx, jobsource.Result{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Job(ctx, early.ID); got.State != api.JobFailed || !strings.Contains(got.Reason, "no space left") {
		t.Errorf("job started with no inode free ended %s: %q", got.State, got.Reason)
	}

	if err := os.RemoveAll(filepath.Join(dir, "filler")); err != nil {
		t.Fatal(err)
	}
	if err := q.Health(); err != nil && strings.Contains(err.Error(), "no file can be created") {
		t.Errorf("Health once files were deleted: %v", err)
	}
	late := submit(t, c, api.JobRequest{Script: "echo after"})
	j = request(t, q)
	j.Log().Write([]byte("after\n"))
	if err := j.Finish(ctx, jobsource.Result{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Job(ctx, late.ID); got.State != api.JobSuccess {
		t.Errorf("job submitted once inodes were free ended %s: %q", got.State, got.Reason)
	}
	// The lost log is cleared by the next log written.
	if err := q.Health(); err != nil {
		t.Errorf("Health once a job's log was written again: %v", err)
	}
}
