package main

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/gcpfake"
)

// In a quota shortage Compute Engine ends the resize DONE and lists the
// members it cannot create with no id, QUOTA_EXCEEDED in their
// lastAttempt (gcpfake's Stockout, docs/gcp.md "Fidelity"). The real
// berth and plugin show the quota error to the operator (the queued
// job's waiting_detail, /healthz), give the group's target back so the
// members are not all created when the quota allows, and run the job
// once it does, the group never above max_instances.
func TestGCPQuotaShortageIsShownAndGivenBack(t *testing.T) {
	const max = 2
	d, cloud := gcpDaemon(t, gcpfake.Options{BootTime: 300 * time.Millisecond, ListingLag: 300 * time.Millisecond,
		StopTime: 300 * time.Millisecond, OperationTime: 200 * time.Millisecond, Stockout: gcpfake.CodeQuota}, max)
	id := d.submit("--", "echo ran")

	waitFor(t, time.Minute, "the queued job to wait for capacity, naming the quota", func() bool {
		j := d.job(id)
		return j.WaitingFor == api.WaitCapacity && strings.Contains(j.WaitingDetail, "QUOTA_EXCEEDED")
	})
	if code, body := d.healthBody(); code != 200 || !strings.Contains(body, `"creation_error"`) || !strings.Contains(body, "Quota 'CPUS' exceeded") {
		t.Errorf("/healthz in a quota shortage: %d %s; want 200, degraded, with the quota error", code, body)
	}
	waitFor(t, 30*time.Second, "the members the group cannot create to be given back", func() bool {
		s := cloud.Group()
		return s.Failing == 0 && s.TargetSize == 0
	})

	cloud.Stockout("")
	if j := d.waitJobs(2*time.Minute, id)[0]; j.State != api.JobSuccess {
		t.Fatalf("job after the shortage: %s (%s)", j.State, j.Reason)
	}
	if s := cloud.Group(); s.Peak > max || s.TargetSize > max {
		t.Errorf("group %+v after the shortage; want at most max_instances %d", s, max)
	}
	waitFor(t, time.Minute, "/healthz to drop the creation error once instances are created again", func() bool {
		_, body := d.healthBody()
		return !strings.Contains(body, "creation_error")
	})
}
