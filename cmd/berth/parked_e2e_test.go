package main

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// Issue 9, item 1: with max_instances = 1 the one instance holds the parked
// environment, so no new booking is possible; the job that resumes it used to
// wait for ever (refused no_idle_slot on every try).
func TestResumeRunsWhenParkedEnvironmentsFillMaxInstances(t *testing.T) {
	d := newDaemon(t, "[autoscaler]\nmax_instances = 1\n")
	key, host := parkMarker(t, d)
	id := d.submit("--resume", key, "--", "cat /berth/marker; hostname")
	jobs := d.waitJobs(60*time.Second, id)
	if j := jobs[0]; j.State != api.JobSuccess || j.Instance != host {
		t.Fatalf("resume job ended %s on %q (%s), want succeeded on %s", j.State, j.Instance, j.Reason, host)
	}
}

// A plain job behind parked environments that hold every instance does not
// wait until environment_ttl: the environment parked longest is evicted after
// environment_evict_after, with its reason, and a later resume of it fails at
// once with that reason.
func TestPlainJobEvictsTheOldestParkedEnvironmentAtTheLimit(t *testing.T) {
	d := newDaemon(t, "[autoscaler]\nmax_instances = 1\nenvironment_evict_after = \"2s\"\n")
	key, _ := parkMarker(t, d)
	id := d.submit("--", "echo plain")
	jobs := d.waitJobs(90*time.Second, id)
	if j := jobs[0]; j.State != api.JobSuccess {
		t.Fatalf("plain job ended %s (%s), want succeeded once the parked environment was evicted", j.State, j.Reason)
	}
	_, errOut, code := d.berth("submit", "--wait", "--resume", key, "--", "true")
	if code == 0 || !strings.Contains(errOut, "evicted") || !strings.Contains(errOut, "environment_evict_after") {
		t.Fatalf("resume of the evicted environment: exit %d, stderr %q; want a failure saying it was evicted and why", code, errOut)
	}
}
