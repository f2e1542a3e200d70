package azure

import (
	"context"
	"testing"

	"github.com/berth-ci/berth/provider"
)

// TestRequestedSizeIsTheCapacity: the size berth reads after a restart
// counts the instances asked for, running and deallocated (suspended), and
// not the one deleted, which Delete Instances took out of the capacity.
func TestRequestedSizeIsTheCapacity(t *testing.T) {
	f := fakeAzure(t, quick)
	g, info := f.newGroup(t, map[string]any{"suspend": true})
	if !info.Capabilities.RequestedSize {
		t.Errorf("Info.Capabilities = %+v; want requested_size", info.Capabilities)
	}
	if n, err := g.RequestedSize(context.Background()); n != 0 || err != nil {
		t.Errorf("RequestedSize of an empty set = %d, %v; want 0", n, err)
	}
	if n, err := g.Increase(context.Background(), 3); n != 3 || err != nil {
		t.Fatalf("Increase(3) = %d, %v", n, err)
	}
	eventually(t, "three running", func() bool { return count(listing(t, g), provider.StateRunning) == 3 })
	name := f.Options().ScaleSet
	if acc, err := g.Suspend(context.Background(), []string{name + "_0"}); err != nil || len(acc) != 1 {
		t.Fatalf("Suspend = %v, %v", acc, err)
	}
	if acc, err := g.Decrease(context.Background(), []string{name + "_1"}); err != nil || len(acc) != 1 {
		t.Fatalf("Decrease = %v, %v", acc, err)
	}
	if n, err := g.RequestedSize(context.Background()); n != 2 || err != nil {
		t.Errorf("RequestedSize with 1 running, 1 deallocated, 1 deleted = %d, %v; want 2 (capacity %d)", n, err, f.Capacity())
	}
}
