package main

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
	"time"

	"github.com/berth-ci/berth/api"
)

// Issue 43, item 4, on the real binary: the state directory's file system
// runs out of inodes with bytes free. /healthz turns degraded at once and
// names the directory, a submit is refused with 507 saying what to do
// (on main /healthz said ok, the submit was accepted and the job failed
// after running, "could not store its output"), and once files are
// deleted berth takes and runs jobs again with no restart.
func TestStateDirOutOfInodesRefusesSubmitsAndRecovers(t *testing.T) {
	d := newDaemon(t, "")
	d.stop()
	state := filepath.Join(d.dir, "state")
	if err := syscall.Mount("tmpfs", state, "tmpfs", 0, "size=256m,nr_inodes=20000,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs with few inodes (needs root with CAP_SYS_ADMIN): %v", err)
	}
	filler := filepath.Join(state, "filler")
	t.Cleanup(func() {
		d.stop()
		os.RemoveAll(filler)
		removeSandboxes(t, filepath.Join(state, "provider", "local"))
		syscall.Unmount(state, syscall.MNT_DETACH)
	})
	d.start()
	if j := d.waitJobs(time.Minute, d.submit("--", "echo before"))[0]; j.State != api.JobSuccess {
		t.Fatalf("a job before the inodes ran out ended %s: %q", j.State, j.Reason)
	}

	if err := os.Mkdir(filler, 0o700); err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; ; n++ {
		f, err := os.Create(filepath.Join(filler, fmt.Sprint(n)))
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
		f.Close()
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(state, &st); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d empty files took the last inodes; %d MB still free", n, st.Bavail*uint64(st.Bsize)>>20)

	code, body := d.healthBody()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "no file can be created in "+filepath.Join(state, "queue", "logs")) {
		t.Fatalf("/healthz with no inode free: %d %s, want 503 naming the log directory", code, body)
	}
	_, err := d.client().Submit(context.Background(), api.JobRequest{Script: "echo refused"})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusInsufficientStorage || !strings.Contains(ae.Message, "delete files there") {
		t.Fatalf("submit with no inode free: %v, want 507 saying what to do", err)
	}

	if err := os.RemoveAll(filler); err != nil {
		t.Fatal(err)
	}
	if j := d.waitJobs(time.Minute, d.submit("--", "echo after"))[0]; j.State != api.JobSuccess {
		t.Errorf("a job once files were deleted ended %s: %q", j.State, j.Reason)
	}
	waitFor(t, time.Minute, "/healthz to be ok again", func() bool { return d.health().Status == "ok" })
}
