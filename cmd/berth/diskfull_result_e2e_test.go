package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// Issue 19, failure 4, on a real full disk: a job whose output fills the
// small file system of the state directory. /healthz turns degraded as
// soon as a write fails (it stayed ok for 45 s before), and once space is
// freed the job's result is saved (not "running" for ever nor failed for
// a restart): a system failure, since its log is incomplete.
func TestFullDiskWhileAJobRunsIsReportedAndTheResultSaved(t *testing.T) {
	d := newDaemon(t, "")
	d.stop()
	state := filepath.Join(d.dir, "state")
	if err := syscall.Mount("tmpfs", state, "tmpfs", 0, "size=24m,mode=0700"); err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root with CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		d.stop()
		freeLogs(state)
		removeSandboxes(t, filepath.Join(state, "provider", "local"))
		syscall.Unmount(state, syscall.MNT_DETACH)
	})
	d.start()
	if h := d.health(); h.Status != "ok" {
		t.Fatalf("/healthz before the disk filled: %+v", h)
	}
	id := d.submit("--", "head -c 40000000 /dev/zero | tr '\\0' x; echo; sleep 2")
	waitFor(t, time.Minute, "/healthz to report the full disk", func() bool {
		return d.health().Status == "degraded"
	})
	if j := d.job(id); j.State != api.JobRunning {
		t.Fatalf("the job is %s (%s) while it still runs", j.State, j.Reason)
	}
	freeLogs(state) // the job's own log is what filled the disk
	j := d.waitJobs(2*time.Minute, id)[0]
	// Its script succeeded but part of its output is lost: it fails loudly
	// as a system failure, never passes with output silently dropped.
	if j.State != api.JobFailed || j.Failure != "system_failure" || !strings.Contains(j.Reason, "log is incomplete") {
		t.Errorf("job after the disk had room again: %s/%s (%s), want a system failure with the incomplete log noted", j.State, j.Failure, j.Reason)
	}
	waitFor(t, time.Minute, "/healthz to be ok again", func() bool { return d.health().Status == "ok" })
}

// freeLogs empties the job logs under state, which filled its disk.
func freeLogs(state string) {
	logs, _ := filepath.Glob(filepath.Join(state, "queue", "logs", "*.log"))
	for _, l := range logs {
		os.Truncate(l, 0)
	}
}
