package azure

import (
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/azurefake"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/providertest"
)

var conformanceCloud = azurefake.Options{BootTime: 100 * time.Millisecond, StartTime: 100 * time.Millisecond,
	DeallocateTime: 100 * time.Millisecond, DeleteTime: 100 * time.Millisecond, ListingLag: 50 * time.Millisecond,
	PollInterval: 50 * time.Millisecond}

// The conformance suite over the fake, with the OS profile's key, the host
// key read from the serial console, and suspend as deallocate and start.
func TestConformance(t *testing.T) {
	f := fakeAzure(t, conformanceCloud)
	providertest.Run(t, func(t *testing.T) provider.InstanceGroup { return New() },
		provider.Settings{Config: f.config(t, map[string]any{"suspend": true}), StateDir: t.TempDir()})
	if c := f.Capacity(); c != 0 {
		t.Errorf("after the suite the set's capacity is %d, want 0", c)
	}
}

// The suite again over public addresses and a Spot set.
func TestConformancePublicAddressSpot(t *testing.T) {
	opts := conformanceCloud
	opts.Spot = true
	f := fakeAzure(t, opts)
	providertest.Run(t, func(t *testing.T) provider.InstanceGroup { return New() },
		provider.Settings{Config: f.config(t, map[string]any{"suspend": true, "use_private_address": false}), StateDir: t.TempDir()})
	if n := f.Calls("ListPublicIPs"); n == 0 {
		t.Error("no public address was looked up")
	}
}
