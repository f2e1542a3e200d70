package main

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/gcpfake"
)

// Issue 43, item 2, on the real berth and GCP plugin: berth is killed
// (kill -9) right after it logs "scale up", its resize held on the way to
// Google so that it never arrives. The restarted berth restores the
// pending increase from its store; with max_instances 1 it would count it
// toward the limit for RestoredListingTimeout (2 min), the queued job
// waiting with nothing starting. The plugin's RequestedSize (the group's
// target size, 0) settles it at the first listing: berth writes it off
// naming the size Google was asked for, and the job runs. Before the
// plugin answered RequestedSize, the write-off came only after 2 minutes,
// and named no size.
func TestGCPRestoredIncreaseThatNeverReachedGoogleIsSettledAtOnce(t *testing.T) {
	const resize = "instanceGroupManagers.resize"
	cloud, cfg := gcpProject(t, gcpfake.Options{BootTime: 300 * time.Millisecond, ListingLag: 300 * time.Millisecond,
		StopTime: 300 * time.Millisecond, OperationTime: 200 * time.Millisecond}, 1)
	d := newDaemonUnstarted(t, cfg)
	cloud.Hold(resize) // from the start: berth scales up for its idle instance at once
	d.start()
	id := d.submit("--", "echo ran")
	// The increase is stored before the plugin is called (the core's
	// persist-before-provider-call rule), so once the resize waits in
	// the hold, the store holds the pending increase.
	waitFor(t, time.Minute, "berth to scale up and its resize to wait on the way to Google", func() bool {
		return strings.Contains(d.log.String(), "scale up") && cloud.Held(resize) == 1
	})
	d.kill9()
	// The plugin exits with berth; its resize goes with it, unanswered.
	waitFor(t, time.Minute, "the held resize to be dropped with the plugin", func() bool { return cloud.Held(resize) == 0 })
	cloud.Release(resize)
	if s := cloud.Group(); s.TargetSize != 0 {
		t.Fatalf("group %+v; want target size 0: the resize must never have reached Google", s)
	}

	d.start()
	// A guard against a hang, well under the 2 minutes the write-off
	// took without RequestedSize, not a measure.
	j := d.waitJobs(90*time.Second, id)[0]
	if j.State != api.JobSuccess {
		t.Fatalf("queued job after the restart: %s (%s)", j.State, j.Reason)
	}
	log := d.log.String()
	if !strings.Contains(log, "written off") || !strings.Contains(log, "the provider was asked for 0 instances") {
		t.Errorf("berth's log after the restart does not write the restored increase off by the group's target size:\n%s", log)
	}
	if s := cloud.Group(); s.Peak > 1 || s.TargetSize > 1 {
		t.Errorf("group %+v; want at most max_instances 1", s)
	}
}
