package gcp

import (
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gcpfake"
	"github.com/berth-ci/berth/provider"
)

// TestRequestedSizeIsTheGroupsTarget: the size berth reads after a restart
// counts the instances asked for, running, coming and suspended, and not
// the one being deleted, which deleteInstances took out of the target
// size. The fake's group models the two fields as the API documents them.
func TestRequestedSizeIsTheGroupsTarget(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{StopTime: time.Hour})
	g, info := newGroup(t, cloud, key, sa, map[string]any{"suspend": true})
	if !info.Capabilities.RequestedSize {
		t.Errorf("Info.Capabilities = %+v; want requested_size", info.Capabilities)
	}
	if n, err := g.RequestedSize(ctx); n != 0 || err != nil {
		t.Errorf("RequestedSize of an empty group = %d, %v; want 0", n, err)
	}
	if n, err := g.Increase(ctx, 3); n != 3 || err != nil {
		t.Fatalf("Increase(3) = %d, %v", n, err)
	}
	var ids []string
	for id, s := range listing(t, g) {
		if s == provider.StateRunning {
			ids = append(ids, id)
		}
	}
	if len(ids) != 3 {
		t.Fatalf("running instances %v; want 3", ids)
	}
	if acc, err := g.Suspend(ctx, ids[:1]); err != nil || len(acc) != 1 {
		t.Fatalf("Suspend(%v) = %v, %v", ids[:1], acc, err)
	}
	if acc, err := g.Decrease(ctx, ids[1:2]); err != nil || len(acc) != 1 {
		t.Fatalf("Decrease(%v) = %v, %v", ids[1:2], acc, err)
	}
	if n, err := g.RequestedSize(ctx); n != 2 || err != nil {
		t.Errorf("RequestedSize with 1 running, 1 suspended, 1 deleting = %d, %v; want 2 (group %+v)", n, err, cloud.Group())
	}
}
