package awsfake

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type testClock struct{ t time.Time }

func (c *testClock) now() time.Time      { return c.t }
func (c *testClock) add(d time.Duration) { c.t = c.t.Add(d) }

// A region kept in a state file comes back after a restart as it was: the
// same endpoint and SSH port, the group's sizes, the instances with their
// IDs, host keys and lifecycle states, and a transition under way (a
// termination) still finishing when it was due.
func TestStateSurvivesARestart(t *testing.T) {
	clk := &testClock{t: time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	opts := Options{Clock: clk.now, BootTime: time.Second, TerminateTime: 10 * time.Second,
		Dir: dir, State: filepath.Join(dir, "state.json"), AuthorizedKey: "ssh-ed25519 AAAA test"}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDesired(3)
	clk.add(2 * time.Second)
	ids := c.Instances()
	if len(ids) != 3 {
		t.Fatalf("%d instances before the restart, want 3", len(ids))
	}
	if code, body := post(t, c, url.Values{"Action": {"EnterStandby"}, "Version": {"2011-01-01"}, "AutoScalingGroupName": {"berth-ci"},
		"InstanceIds.member.1": {ids[0]}, "ShouldDecrementDesiredCapacity": {"true"}}, true); code != 200 {
		t.Fatalf("EnterStandby: %d %s", code, body)
	}
	if code, body := post(t, c, url.Values{"Action": {"TerminateInstanceInAutoScalingGroup"}, "Version": {"2011-01-01"},
		"InstanceId": {ids[1]}, "ShouldDecrementDesiredCapacity": {"true"}}, true); code != 200 {
		t.Fatalf("TerminateInstanceInAutoScalingGroup: %d %s", code, body)
	}
	before := map[string]Instance{}
	for _, id := range ids {
		before[id], _ = c.Instance(id)
	}
	url1, port := c.URL(), c.SSHPort()
	c.Close()

	again, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.URL() != url1 || again.SSHPort() != port {
		t.Errorf("after the restart: endpoint %s, SSH port %d; want %s and %d", again.URL(), again.SSHPort(), url1, port)
	}
	if got := again.Instances(); strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Errorf("instances after the restart: %v, want %v", got, ids)
	}
	for _, id := range ids {
		in, _ := again.Instance(id)
		b := before[id]
		if in.HostKey != b.HostKey || in.Lifecycle != b.Lifecycle || in.State != b.State || in.PrivateIP != b.PrivateIP {
			t.Errorf("%s after the restart: %+v; want %+v", id, in, b)
		}
	}
	if g := again.Group(); g.Desired != 1 || g.Max != 10 {
		t.Errorf("group after the restart: %+v; want desired 1", g)
	}
	clk.add(11 * time.Second)
	if in, _ := again.Instance(ids[1]); in.State != EC2Terminated {
		t.Errorf("the termination under way before the restart: %s after it was due, want %s", in.State, EC2Terminated)
	}
	if code, body := post(t, again, url.Values{"Action": {"DescribeInstances"}, "Version": {"2016-11-15"}}, true); code != 200 || !strings.Contains(body, ids[2]) {
		t.Errorf("DescribeInstances after the restart: %d %s", code, body)
	}
}
