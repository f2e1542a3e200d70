package aws

import (
	"testing"

	"github.com/berth-ci/berth/internal/awsfake"
	"github.com/berth-ci/berth/provider"
)

// suspendedOne returns a group with suspend on and one of its instances
// suspended (Standby, stopped).
func suspendedOne(t *testing.T) (*awsfake.Cloud, *Group, string) {
	t.Helper()
	cloud, key := fakeAWS(t, awsfake.Options{MaxSize: 2})
	g, _ := newGroup(t, cloud, key, map[string]any{"suspend": true})
	g.Increase(ctx, 1)
	id := cloud.Instances()[0]
	if acc, err := g.Suspend(ctx, []string{id}); err != nil || len(acc) != 1 {
		t.Fatalf("Suspend = %v, %v", acc, err)
	}
	return cloud, g, id
}

// DescribeInstances throttled beyond the SDK's own retries while Resume
// waits for the started instance: the wait goes on, and the resume ends
// with the instance running and in service (issue 44: it failed the job
// and left the instance started in Standby).
func TestResumeSurvivesThrottledDescribeInstances(t *testing.T) {
	cloud, g, id := suspendedOne(t)
	cloud.Throttle("DescribeInstances", 6) // two polls' worth of the SDK's 3 attempts
	if acc, err := g.Resume(ctx, []string{id}); err != nil || len(acc) != 1 {
		t.Fatalf("Resume under throttled DescribeInstances = %v, %v; want it resumed", acc, err)
	}
	if in, _ := cloud.Instance(id); in.Lifecycle != awsfake.LifecycleInService || in.State != awsfake.EC2Running {
		t.Errorf("resumed instance is %s/%s, want InService/running", in.Lifecycle, in.State)
	}
	if l := listing(t, g); l[id] != provider.StateRunning && l[id] != provider.StateResuming {
		t.Errorf("listing %v after Resume; want %s running or resuming", l, id)
	}
}

// A resume that fails after StartInstances (here ExitStandby is refused)
// is undone: the instance is stopped again and stays in Standby, not left
// running there.
func TestFailedResumeIsUndone(t *testing.T) {
	cloud, g, id := suspendedOne(t)
	cloud.Deny("ExitStandby", true)
	if acc, err := g.Resume(ctx, []string{id}); err == nil || len(acc) != 0 {
		t.Fatalf("Resume with ExitStandby denied = %v, %v; want an error", acc, err)
	}
	in, _ := cloud.Instance(id)
	if in.Lifecycle != awsfake.LifecycleStandby || (in.State != awsfake.EC2Stopped && in.State != awsfake.EC2Stopping) {
		t.Errorf("instance after the failed resume is %s/%s; want Standby and stopped", in.Lifecycle, in.State)
	}
	cloud.Deny("ExitStandby", false)
	if acc, err := g.Resume(ctx, []string{id}); err != nil || len(acc) != 1 {
		t.Errorf("Resume once allowed = %v, %v; want it resumed", acc, err)
	}
}
