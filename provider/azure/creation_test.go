package azure

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/azurefake"
	"github.com/berth-ci/berth/provider"
)

// skew moves the group's clock forward by what advance adds, so tests
// pass a backoff or a Retry-After without waiting for it.
type skew struct{ d atomic.Int64 }

func (s *skew) now() time.Time          { return time.Now().Add(time.Duration(s.d.Load())) }
func (s *skew) advance(d time.Duration) { s.d.Add(int64(d)) }

func skewed(g *Group) *skew {
	s := &skew{}
	g.now = s.now
	return s
}

// Azure's default is an overprovisioned set, which berth cannot drive:
// Init refuses it naming the setting and the fix.
func TestOverprovisionedSetIsRefusedAtInit(t *testing.T) {
	f := fakeAzure(t, azurefake.Options{})
	f.SetOverprovision(true)
	_, err := New().Init(context.Background(), provider.Settings{Config: f.config(t, nil), StateDir: t.TempDir()})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "overprovision") ||
		!strings.Contains(err.Error(), "az vmss update --resource-group berth --name berth-ci --set overprovision=false") || !strings.Contains(err.Error(), "Terraform") {
		t.Fatalf("Init on an overprovisioned set: %v; want ErrUnsupported naming overprovision, the az command and Terraform", err)
	}
}

// In an allocation failure the set keeps the instances it could not
// create, Failed and counted in capacity. Increase finds them, deletes
// them (the capacity goes back), says how many it created (none), returns
// ErrStockout (transient), and backs off: a second Increase does not call
// Azure. Once the backoff passed and Azure has capacity again, it works.
func TestAllocationFailureIsDeletedAndBackedOff(t *testing.T) {
	f := fakeAzure(t, azurefake.Options{PollInterval: 20 * time.Millisecond, ListingLag: 200 * time.Millisecond})
	g, _ := f.newGroup(t, nil)
	clk := skewed(g)
	f.AllocationFailure("")
	n, err := g.Increase(context.Background(), 2)
	if n != 0 || !errors.Is(err, ErrStockout) || !errors.Is(err, provider.ErrStockout) || !errors.Is(err, provider.ErrTransient) ||
		!strings.Contains(err.Error(), "AllocationFailed x2") || !strings.Contains(err.Error(), "sufficient capacity") {
		t.Fatalf("Increase in a shortage = %d, %v; want 0, ErrStockout (transient) naming AllocationFailed x2", n, err)
	}
	if c := f.Capacity(); c != 0 {
		t.Errorf("capacity %d after the failed instances were deleted, want 0", c)
	}
	if got := listing(t, g); len(got) != 0 {
		t.Errorf("listing after the failure: %v; want the failed instances not reported", got)
	}
	calls := f.Calls("UpdateScaleSet")
	if _, err := g.Increase(context.Background(), 1); !errors.Is(err, ErrStockout) || !strings.Contains(err.Error(), "asking again after") || f.Calls("UpdateScaleSet") != calls {
		t.Errorf("Increase during the backoff: %v, %d capacity updates (had %d); want the failure again, no call", err, f.Calls("UpdateScaleSet"), calls)
	}
	f.AllocationFailure("-")
	clk.advance(provider.BackoffFirst)
	if n, err := g.Increase(context.Background(), 1); n != 1 || err != nil {
		t.Errorf("Increase after the shortage = %d, %v; want 1, nil", n, err)
	}
}

// An instance that failed after Increase returned (its operation outlived
// creation_check) is found by the listing: not reported, deleted, and the
// next Increase gets the failure.
func TestListingDeletesInstancesThatFailedLater(t *testing.T) {
	f := fakeAzure(t, azurefake.Options{})
	g, _ := f.newGroup(t, nil)
	f.AllocationFailure(azurefake.CodeZonalAllocationFailed)
	f.SetCapacity(2) // another actor's scale-out, failing
	f.AllocationFailure("-")
	if got := listing(t, g); len(got) != 0 {
		t.Errorf("listing with two failed instances: %v; want none reported", got)
	}
	eventually(t, "the failed instances deleted", func() bool { return f.Capacity() == 0 })
	if _, err := g.Increase(context.Background(), 1); !errors.Is(err, ErrStockout) || !strings.Contains(err.Error(), "ZonalAllocationFailed x2") {
		t.Errorf("Increase after the listing found failures: %v; want ErrStockout naming them", err)
	}
}

// A vCPU quota refuses the request itself (409 OperationNotAllowed): the
// same rule as every cloud's quota, ErrQuota and transient, with Azure's
// numbers and the fix, and the backoff.
func TestQuotaRefusalIsTransientAndBackedOff(t *testing.T) {
	f := fakeAzure(t, azurefake.Options{CoreQuota: 2})
	g, _ := f.newGroup(t, nil)
	n, err := g.Increase(context.Background(), 2)
	if n != 0 || !errors.Is(err, ErrQuota) || !errors.Is(err, provider.ErrQuota) || !errors.Is(err, provider.ErrTransient) ||
		!strings.Contains(err.Error(), "Current Limit: 2") || !strings.Contains(err.Error(), "higher vCPU quota") {
		t.Fatalf("Increase over the quota = %d, %v; want 0, ErrQuota (transient) with Azure's numbers and the fix", n, err)
	}
	calls := f.Calls("UpdateScaleSet")
	if _, err := g.Increase(context.Background(), 2); !errors.Is(err, ErrQuota) || f.Calls("UpdateScaleSet") != calls {
		t.Errorf("Increase during the backoff: %v; %d calls, want %d", err, f.Calls("UpdateScaleSet"), calls)
	}
}

// A Retry-After above 60 s, which azcore's retry policy does not wait
// for, is honoured by the plugin: no write before it (the fake counts
// calls that come early), an error naming the time, transient; reads go
// on. After it, calls go through again.
func TestLongRetryAfterIsHonoured(t *testing.T) {
	f := fakeAzure(t, azurefake.Options{})
	g, _ := f.newGroup(t, nil)
	clk := skewed(g)
	f.ThrottleFor("UpdateScaleSet", 90*time.Second)
	_, err := g.Increase(context.Background(), 1)
	if !errors.Is(err, ErrThrottled) || !errors.Is(err, provider.ErrTransient) || !strings.Contains(err.Error(), "Retry-After 1m30s") {
		t.Fatalf("Increase throttled for 90 s: %v; want ErrThrottled, transient, naming the wait", err)
	}
	if c := f.Calls("UpdateScaleSet"); c != 1 {
		t.Errorf("%d capacity updates; want 1 (azcore does not retry past 60 s)", c)
	}
	for range 3 {
		if _, err := g.Increase(context.Background(), 1); !errors.Is(err, ErrThrottled) || !strings.Contains(err.Error(), "no write call before") {
			t.Errorf("Increase before the Retry-After: %v; want ErrThrottled naming the time", err)
		}
	}
	if f.Early("UpdateScaleSet") != 0 || f.Calls("UpdateScaleSet") != 1 {
		t.Errorf("%d calls before the Retry-After (%d in all); want none", f.Early("UpdateScaleSet"), f.Calls("UpdateScaleSet"))
	}
	listing(t, g) // reads are another bucket
	f.ThrottleFor("UpdateScaleSet", 0)
	clk.advance(91 * time.Second)
	if n, err := g.Increase(context.Background(), 1); n != 1 || err != nil {
		t.Errorf("Increase after the Retry-After = %d, %v; want 1, nil", n, err)
	}
}
