package main

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/awsfake"
)

// Issue 43, item 7, end to end on AWS: the group terminates an idle
// instance (its health check failed: SetInstanceHealth Unhealthy, and the
// instance goes shutting-down) while berth's listings are throttled, so
// berth still holds it ready and books the next job there. The plugin's
// ConnectInfo finds it shutting-down and says so (provider.ErrInstanceGoing);
// the core moves the booking (scaler/testdata/connect_instance_going.txt)
// and the job runs on another instance instead of failing with
// "shutting-down, not running".
func TestAWSJobBookedOnATerminatingInstanceMovesToAnother(t *testing.T) {
	cloud, _, cfg := awsFake(t, awsfake.Options{MaxSize: 3, BootTime: 300 * time.Millisecond,
		TerminateTime: 2 * time.Minute}, 2)
	d := newDaemon(t, cfg+"[[autoscaler.policy]]\nidle_count = 1\n")

	var old string
	waitFor(t, time.Minute, "berth to hold one idle instance, running", func() bool {
		for _, in := range d.instances() {
			if ci, _ := cloud.Instance(in.ID); in.State == "ready" && ci.State == awsfake.EC2Running {
				old = in.ID
				return true
			}
		}
		return false
	})
	// Throttle the group's listing beyond the SDK's retries, and wait for a
	// whole throttled round, so that no listing sees what follows.
	cloud.ThrottleOn("DescribeAutoScalingGroups", true)
	at := cloud.Calls("DescribeAutoScalingGroups")
	waitFor(t, time.Minute, "a listing throttled", func() bool { return cloud.Calls("DescribeAutoScalingGroups") >= at+4 })
	if err := cloud.MarkUnhealthy(old); err != nil {
		t.Fatal(err)
	}
	if in, _ := cloud.Instance(old); in.State != awsfake.EC2ShuttingDown {
		t.Fatalf("the unhealthy instance is %s/%s, want shutting-down", in.Lifecycle, in.State)
	}

	done := make(chan [3]any, 1)
	go func() {
		out, errOut, code := d.berth("submit", "--wait", "--", "basename $HOME")
		done <- [3]any{out, errOut, code}
	}()
	// Lift the throttle once the booking moved (or the job ended): the job
	// needs a listing to see its new instance ready.
	var r [3]any
	ended := false
	waitFor(t, 2*time.Minute, "the booking to move off "+old+", or the job to end", func() bool {
		select {
		case r = <-done:
			ended = true
			return true
		default:
		}
		return strings.Contains(d.log.String(), "the job moves to another instance")
	})
	cloud.ThrottleOn("DescribeAutoScalingGroups", false)
	if !ended {
		r = <-done
	}
	out, errOut, code := r[0].(string), r[1].(string), r[2].(int)
	if code != 0 || strings.Contains(errOut, "shutting-down") {
		t.Fatalf("the job booked on %s, which the group is terminating: exit %d, stdout %q; want it run elsewhere; stderr %s", old, code, out, errOut)
	}
	if on := strings.TrimSpace(out); on == old || !strings.HasPrefix(on, "i-") {
		t.Errorf("the job ran on %q; want another instance than %s", on, old)
	}
	// Moved because ConnectInfo said the instance is going, not later
	// through another path (a heartbeat, the acquire timeout).
	moved := false
	for _, l := range strings.Split(d.log.String(), "\n") {
		if strings.Contains(l, "the job moves to another instance") && strings.Contains(l, old) && strings.Contains(l, "being deleted by the cloud") {
			moved = true
		}
	}
	if !moved {
		t.Errorf("berth's log does not say the booking moved off %s because ConnectInfo found it going", old)
	}
}
