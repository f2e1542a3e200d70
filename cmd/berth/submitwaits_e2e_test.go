package main

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// A job that waits for a slot says why on `submit --wait`'s stderr while
// its log is still empty, and its output stays on stdout.
func TestSubmitWaitSaysWhyTheJobWaits(t *testing.T) {
	d := newDaemon(t, "[autoscaler]\nmax_instances = 1\n")
	first := d.submit("--", "echo started; sleep 8")
	waitFor(t, time.Minute, "the first job to run", func() bool {
		out, _, _ := d.berth("logs", first)
		return d.job(first).State == api.JobRunning && strings.Contains(out, "started")
	})
	out, errOut, code := d.berth("submit", "--wait", "--", "echo second")
	if code != 0 || out != "second\n" {
		t.Fatalf("submit --wait exited %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "waits: ") || !strings.Contains(errOut, "max_instances") {
		t.Errorf("submit --wait did not say the job waits for max_instances; stderr:\n%s", errOut)
	}
}
