package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/berth-ci/berth/internal/awsfake"
)

// A parked environment resumed while EC2 throttles DescribeInstances
// beyond the SDK's retries (internal/awsfake's Throttle, switched on just
// before the resume): the real berth and plugin resume it, the job reads
// the parked file, and the instance is in service, not started in Standby
// (issue 44: the job failed and `berth instances` called it suspended).
func TestAWSResumeUnderThrottledDescribeInstances(t *testing.T) {
	cloud, _, cfg := awsFake(t, awsfake.Options{MaxSize: 2, BootTime: 300 * time.Millisecond,
		StopTime: 300 * time.Millisecond, TerminateTime: 300 * time.Millisecond}, 2)
	var c map[string]any
	if _, err := toml.Decode(cfg, &c); err != nil {
		t.Fatal(err)
	}
	c["autoscaler"].(map[string]any)["provider_config"].(map[string]any)["suspend"] = true
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(c); err != nil {
		t.Fatal(err)
	}
	d := newDaemon(t, b.String())

	out, errOut, code := d.berth("submit", "--wait", "--suspend", "--", "echo parked > $HOME/marker; basename $HOME")
	key := envKeyLine.FindStringSubmatch(errOut)
	if code != 0 || key == nil {
		t.Fatalf("submit --suspend: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	host := strings.TrimSpace(out)
	waitFor(t, time.Minute, host+" in Standby and stopped, and berth to list it suspended", func() bool {
		in, _ := cloud.Instance(host)
		if in.Lifecycle != awsfake.LifecycleStandby || in.State != awsfake.EC2Stopped {
			return false
		}
		for _, bi := range d.instances() {
			if bi.ID == host && bi.State == "suspended" {
				return true
			}
		}
		return false
	})
	// Throttled from before the resume until the plugin's poll met it
	// beyond the SDK's 3 attempts: two rounds after StartInstances.
	starts := cloud.Calls("StartInstances")
	cloud.ThrottleOn("DescribeInstances", true)
	resumed := make(chan [3]any, 1)
	go func() {
		out, errOut, code := d.berth("submit", "--wait", "--resume", key[1], "--", "cat $HOME/marker; basename $HOME")
		resumed <- [3]any{out, errOut, code}
	}()
	var atStart int
	var r [3]any
	done := false
	waitFor(t, 2*time.Minute, "DescribeInstances throttled for two rounds of the SDK's retries after StartInstances, or the job to end", func() bool {
		select {
		case r = <-resumed:
			done = true
			return true
		default:
		}
		if atStart == 0 && cloud.Calls("StartInstances") > starts {
			atStart = cloud.Calls("DescribeInstances")
		}
		return atStart > 0 && cloud.Calls("DescribeInstances") >= atStart+6
	})
	cloud.ThrottleOn("DescribeInstances", false)
	if !done {
		r = <-resumed
	}
	if want := "parked\n" + host + "\n"; r[2].(int) != 0 || r[0].(string) != want {
		t.Fatalf("resume under throttling: exit %d, stdout %q, want %q; stderr %s", r[2], r[0], want, r[1])
	}
	if in, _ := cloud.Instance(host); in.Lifecycle != awsfake.LifecycleInService || in.State != awsfake.EC2Running {
		t.Errorf("resumed instance is %s/%s, want InService/running", in.Lifecycle, in.State)
	}
}
