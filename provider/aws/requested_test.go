package aws

import (
	"testing"

	"github.com/berth-ci/berth/internal/awsfake"
)

// TestRequestedSizeIsTheDesiredCapacity: the size berth reads after a
// restart counts the instances asked for, in service and in Standby
// (berth's suspended ones, which left DesiredCapacity), and not the ones
// terminated with the desired capacity decremented.
func TestRequestedSizeIsTheDesiredCapacity(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{MaxSize: 5})
	g, info := newGroup(t, cloud, key, map[string]any{"suspend": true})
	if !info.Capabilities.RequestedSize {
		t.Errorf("Info.Capabilities = %+v; want requested_size", info.Capabilities)
	}
	if n, err := g.RequestedSize(ctx); n != 0 || err != nil {
		t.Errorf("RequestedSize of an empty group = %d, %v; want 0", n, err)
	}
	if n, err := g.Increase(ctx, 4); n != 4 || err != nil {
		t.Fatalf("Increase(4) = %d, %v", n, err)
	}
	if n, err := g.RequestedSize(ctx); n != 4 || err != nil {
		t.Errorf("RequestedSize after Increase(4) = %d, %v; want 4", n, err)
	}
	listing(t, g)
	ids := cloud.Instances()
	if acc, err := g.Suspend(ctx, ids[:1]); err != nil || len(acc) != 1 {
		t.Fatalf("Suspend(%v) = %v, %v", ids[:1], acc, err)
	}
	if acc, err := g.Decrease(ctx, ids[1:2]); err != nil || len(acc) != 1 {
		t.Fatalf("Decrease(%v) = %v, %v", ids[1:2], acc, err)
	}
	if n, err := g.RequestedSize(ctx); n != 3 || err != nil {
		t.Errorf("RequestedSize with 2 in service, 1 in Standby, 1 terminated = %d, %v; want 3 (group %+v)", n, err, cloud.Group())
	}
}
