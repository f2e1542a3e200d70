package gcp

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gcpfake"
	"github.com/berth-ci/berth/provider"
)

// In a quota shortage the resize ends DONE and the new members are listed
// CREATING with no id and QUOTA_EXCEEDED in lastAttempt: Increase reads
// them, returns a typed transient error naming the quota, and gives the
// target back, so the group does not create them all when the quota is
// raised.
func TestQuotaShortageIsReportedAndTheTargetGivenBack(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{})
	g, _ := newGroup(t, cloud, key, sa, map[string]any{"max_size": 5})
	clk := &manualClock{t: time.Now()}
	g.now = clk.now
	cloud.Stockout(gcpfake.CodeQuota)
	n, err := g.Increase(ctx, 3)
	if n != 0 || !errors.Is(err, ErrQuota) || !errors.Is(err, provider.ErrTransient) || !strings.Contains(err.Error(), "Quota 'CPUS' exceeded") {
		t.Fatalf("Increase(3) in a quota shortage = %d, %v; want 0 and ErrQuota (transient) with Google's message", n, err)
	}
	if s := cloud.Group(); s.TargetSize != 0 || s.Failing != 0 {
		t.Errorf("group %+v after the failed increase; want the target given back and no member left to create later", s)
	}
	// Asked again at once, it answers with the failure without a resize
	// that would fail too, until its backoff passed.
	resizes := cloud.Calls("instanceGroupManagers.resize")
	if n, err := g.Increase(ctx, 1); n != 0 || !errors.Is(err, ErrQuota) || cloud.Calls("instanceGroupManagers.resize") != resizes {
		t.Errorf("Increase(1) right after the failure = %d, %v with %d more resizes; want the failure again and no resize", n, err, cloud.Calls("instanceGroupManagers.resize")-resizes)
	}
	cloud.Stockout("")
	if s := cloud.Group(); s.Live != 0 {
		t.Errorf("group %+v once the quota allows: instances nobody asked for any more were created", s)
	}
	clk.advance(provider.BackoffFirst)
	if n, err := g.Increase(ctx, 2); n != 2 || err != nil {
		t.Errorf("Increase(2) after the shortage = %d, %v; want 2, nil", n, err)
	}
}

// A zone out of capacity is ErrStockout, not ErrQuota.
func TestStockoutIsNotAQuota(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{})
	g, _ := newGroup(t, cloud, key, sa, nil)
	cloud.Stockout(gcpfake.CodeStockout)
	n, err := g.Increase(ctx, 1)
	if n != 0 || !errors.Is(err, ErrStockout) || errors.Is(err, ErrQuota) || !errors.Is(err, provider.ErrTransient) {
		t.Errorf("Increase(1) in a stockout = %d, %v; want 0 and ErrStockout (transient)", n, err)
	}
}

// A member whose creation fails later (a preempted Spot VM the group
// cannot recreate) is seen by Update: its target is given back, so the
// group does not create it when capacity returns.
func TestMemberFailingLaterIsGivenBackByUpdate(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{Spot: true})
	g, _ := newGroup(t, cloud, key, sa, nil)
	if n, err := g.Increase(ctx, 1); n != 1 || err != nil {
		t.Fatalf("Increase(1) = %d, %v", n, err)
	}
	listing(t, g)
	cloud.Stockout(gcpfake.CodeStockout)
	if err := cloud.Preempt(cloud.Instances()[0]); err != nil {
		t.Fatal(err)
	}
	if l := listing(t, g); len(l) != 1 || count(l, provider.StateDeleted) != 1 {
		t.Errorf("listing %v after the preemption; want the old instance deleted and nothing else", l)
	}
	if s := cloud.Group(); s.TargetSize != 0 || s.Failing != 0 {
		t.Errorf("group %+v; want the member it cannot recreate given back", s)
	}
}

// A new member is listed without an id before it exists: Increase waits
// for it (creation_check) instead of reporting it, and it is reported
// once it has one.
func TestMemberWithoutIDYetIsComing(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{CreationLag: 800 * time.Millisecond})
	g, _ := newGroup(t, cloud, key, sa, nil)
	if n, err := g.Increase(ctx, 1); n != 1 || err != nil {
		t.Fatalf("Increase(1) = %d, %v", n, err)
	}
	if l := listing(t, g); len(l) != 1 {
		t.Errorf("listing %v after Increase watched the creation; want the instance with its id", l)
	}
}
