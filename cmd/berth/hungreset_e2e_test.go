package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// TestHungPluginDuringResetNeverHandsTheInstanceOn freezes the provider
// plugin (SIGSTOP) just as a job that wrote a file ends, so that the reset
// between jobs gets no answer. With max_instances = 1 the next job could only
// run on that instance; it must not (issue 19, failure 1): the instance whose
// reset did not succeed is deleted, and the next job runs on a new one and
// finds nothing of the first job's files.
func TestHungPluginDuringResetNeverHandsTheInstanceOn(t *testing.T) {
	bin := pluginBin(t, "cmd/berth-provider-local", "berth-provider-local")
	d := newDaemon(t, `
[autoscaler]
provider_path = "`+bin+`"
max_instances = 1
plugin_call_timeout = "5s"
reset_timeout = "2s"
`)
	pid := d.health().Plugin.PID
	first := d.submit("--", "echo secret > /tmp/a; echo started; sleep 1")
	var inst string
	waitFor(t, time.Minute, "the first job to start", func() bool {
		// The log first: a job read before it may be running without its
		// instance recorded yet (the queue marks it running when taken).
		out, _, _ := d.berth("logs", first)
		j := d.job(first)
		inst = j.Instance
		return j.State == api.JobRunning && inst != "" && strings.Contains(out, "started")
	})
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// Should the test fail before berth kills the frozen plugin, let it go.
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	if j := d.waitJobs(time.Minute, first)[0]; j.State != api.JobSuccess {
		t.Fatalf("first job: %s (%s)", j.State, j.Reason)
	}
	out, errOut, code := d.berth("submit", "--wait", "--", "cat /tmp/a 2>/dev/null || echo clean; hostname")
	if code != 0 {
		t.Fatalf("second job: exit %d, %q %s", code, out, errOut)
	}
	if !strings.HasPrefix(out, "clean") {
		t.Errorf("the job after a hung reset saw the first job's file:\n%s", out)
	}
	if strings.Contains(out, inst) {
		t.Errorf("the job after a hung reset ran on the same instance %s:\n%s", inst, out)
	}
	if !strings.Contains(d.log.String(), "instance reset failed; deleting the instance") {
		t.Errorf("berth's log does not say why it deleted %s", inst)
	}
}
