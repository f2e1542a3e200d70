package aws

import (
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/awsfake"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/providertest"
)

var conformanceCloud = awsfake.Options{BootTime: 100 * time.Millisecond, StopTime: 100 * time.Millisecond,
	TerminateTime: 100 * time.Millisecond, ListingLag: 50 * time.Millisecond, LifecycleTime: 100 * time.Millisecond}

// The conformance suite over the fake, with a static key from the launch
// template's key pair and the host key read from the console output;
// suspend is Standby plus StopInstances.
func TestConformanceStaticKey(t *testing.T) {
	cloud, keyPath := fakeAWS(t, conformanceCloud)
	providertest.Run(t, func(t *testing.T) provider.InstanceGroup { return New() },
		provider.Settings{Config: configFor(t, cloud, keyPath, map[string]any{"suspend": true}), StateDir: t.TempDir()})
	if g := cloud.Group(); g.Desired != 0 {
		t.Errorf("after the suite the group's desired capacity is %d, want 0", g.Desired)
	}
}

// The suite again with EC2 Instance Connect one-time keys, public
// addresses, and a console that shows only fingerprints, so the host key
// is taken from the server and checked against them.
func TestConformanceInstanceConnect(t *testing.T) {
	opts := conformanceCloud
	opts.Console = awsfake.ConsoleFingerprints
	cloud, _ := fakeAWS(t, opts)
	cfg := configFor(t, cloud, "", map[string]any{
		"connector":           map[string]any{"username": "ec2-user", "use_instance_connect": true},
		"use_private_address": false,
	})
	providertest.Run(t, func(t *testing.T) provider.InstanceGroup { return New() },
		provider.Settings{Config: cfg, StateDir: t.TempDir()})
	if n := cloud.Calls("SendSSHPublicKey"); n == 0 {
		t.Error("no key was pushed with EC2 Instance Connect")
	}
}
