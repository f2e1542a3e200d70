package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// An instance berth finds running with no record of it (here: berth killed
// while a job wrote a file, then its state started anew on purpose with
// `berth state new-fleet`) may hold that job's files. It is reset before
// any job: the next job on it (max_instances = 1) finds nothing of the old
// one. Before issue 32 it was adopted idle as it was.
func TestInstanceFoundRunningIsResetBeforeAnyJob(t *testing.T) {
	d := newDaemon(t, "[autoscaler]\nmax_instances = 1\n")
	first := d.submit("--", "echo secret > /tmp/a; echo started; sleep 600")
	waitFor(t, time.Minute, "the first job to write its file", func() bool {
		out, _, _ := d.berth("logs", first)
		return d.job(first).State == api.JobRunning && strings.Contains(out, "started")
	})
	d.kill9()
	stateDir := filepath.Join(d.dir, "state")
	for _, f := range []string{"state.db", "state.db.bak"} {
		os.Remove(filepath.Join(stateDir, f))
	}
	if out, errOut, code := d.berth("state", "new-fleet", "--state-dir", stateDir); code != 0 {
		t.Fatalf("berth state new-fleet: %d %s%s", code, out, errOut)
	}
	d.start()
	out, errOut, code := d.berth("submit", "--wait", "--", "cat /tmp/a 2>/dev/null || echo clean")
	if code != 0 || out != "clean\n" {
		t.Fatalf("the job after the restart: exit %d, %q (want clean) %s", code, out, errOut)
	}
	if !strings.Contains(d.log.String(), "was reset before any job") {
		t.Errorf("berth's log does not say it reset the instance it found running")
	}
}
