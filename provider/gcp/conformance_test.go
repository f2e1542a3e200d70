package gcp

import (
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gcpfake"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/providertest"
)

var conformanceCloud = gcpfake.Options{BootTime: 100 * time.Millisecond, StopTime: 100 * time.Millisecond,
	OperationTime: 100 * time.Millisecond, ListingLag: 50 * time.Millisecond}

// The conformance suite over a fake zonal group: static key from the
// template's ssh-keys, host keys from guest attributes, suspend through
// the group's suspendInstances and resumeInstances.
func TestConformanceZonal(t *testing.T) {
	cloud, key, sa := fakeGCP(t, conformanceCloud)
	providertest.Run(t, func(t *testing.T) provider.InstanceGroup { return New() },
		provider.Settings{Config: configFor(t, cloud, key, sa, map[string]any{"suspend": true}), StateDir: t.TempDir()})
	if g := cloud.Group(); g.TargetSize != 0 || g.TargetSuspendedSize != 0 {
		t.Errorf("after the suite the group has target size %d and %d suspended, want 0 and 0", g.TargetSize, g.TargetSuspendedSize)
	}
	if cloud.Calls("token") == 0 {
		t.Error("the provider never fetched an access token with the service account key")
	}
}

// The suite again over a regional group spread over two zones, reached
// on the instances' external addresses.
func TestConformanceRegional(t *testing.T) {
	opts := conformanceCloud
	opts.Region = "europe-west1"
	cloud, key, sa := fakeGCP(t, opts)
	providertest.Run(t, func(t *testing.T) provider.InstanceGroup { return New() },
		provider.Settings{Config: configFor(t, cloud, key, sa, map[string]any{"suspend": true, "use_private_address": false}), StateDir: t.TempDir()})
	if n := cloud.Calls("regionInstanceGroupManagers.resize"); n == 0 {
		t.Error("no regional resize was called")
	}
}
