package main

// End-to-end tests of issue 43's items 6 and 7 on the real berth and plugin
// binaries: a transient error on the connection-details call is retried
// within instance_acquire_timeout, and a job booked on an instance the
// cloud is terminating moves to another instance.

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/gcpfake"
)

// A burst of server errors on instances.get, the call behind the GCP
// plugin's connection details, outlasts the plugin's own five attempts
// twice over while the instance is healthy. Each job waits it out and
// runs; the log names the errors as Google's server errors, not a rate or
// a quota. On main the first job failed ("rate or quota exceeded"), and so
// did the next until the burst was spent.
func TestGCPServerErrorBurstOnConnectionDetailsDoesNotFailJobs(t *testing.T) {
	d, cloud := gcpDaemon(t, gcpfake.Options{BootTime: 300 * time.Millisecond, ListingLag: 300 * time.Millisecond,
		StopTime: 300 * time.Millisecond, OperationTime: 200 * time.Millisecond}, 2)
	// A first job boots the instance: the burst then meets a healthy one.
	if j := d.waitJobs(2*time.Minute, d.submit("--", "true"))[0]; j.State != api.JobSuccess {
		t.Fatalf("first job: %s %s", j.State, j.Reason)
	}
	before := cloud.Calls("instances.get")
	const burst = 12
	cloud.FailWithServerError("instances.get", burst, http.StatusInternalServerError)
	var ids []string
	for range 2 {
		ids = append(ids, d.submit("--", "echo ran"))
	}
	for _, j := range d.waitJobs(3*time.Minute, ids...) {
		if j.State != api.JobSuccess {
			t.Errorf("job %s under a burst of %d server errors: %s %q; want success", j.ID, burst, j.State, j.Reason)
		}
	}
	if n := cloud.Calls("instances.get") - before; n <= burst {
		t.Errorf("instances.get called %d times since the burst began; want more than the %d failures", n, burst)
	}
	log := d.log.String()
	if !strings.Contains(log, "server error") {
		t.Errorf("berth's log never names the server error:\n%s", log)
	}
	if strings.Contains(log, "rate or quota") {
		t.Errorf("berth's log calls a 500 a rate or quota refusal:\n%s", log)
	}
}
