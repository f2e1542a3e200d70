package gcp

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gcpfake"
	"github.com/berth-ci/berth/provider"
)

var ctx = context.Background()

// manualClock is the fake project's and the provider's clock in tests
// that step through listing lag and boots.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *manualClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func count(l map[string]provider.State, s provider.State) int {
	n := 0
	for _, st := range l {
		if st == s {
			n++
		}
	}
	return n
}

func TestIncreaseResizesUpToMaxSize(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{})
	g, info := newGroup(t, cloud, key, sa, map[string]any{"max_size": 3})
	if info.MaxSize != 3 {
		t.Errorf("Info.MaxSize = %d, want max_size 3", info.MaxSize)
	}
	if n, err := g.Increase(ctx, 2); n != 2 || err != nil {
		t.Fatalf("Increase(2) = %d, %v", n, err)
	}
	n, err := g.Increase(ctx, 2)
	if n != 1 || !errors.Is(err, ErrMaxSize) || !strings.Contains(err.Error(), "max_size 3") {
		t.Fatalf("Increase(2) at 2 of 3 = %d, %v; want 1 and ErrMaxSize giving the numbers", n, err)
	}
	if s := cloud.Group(); s.TargetSize != 3 || s.Live != 3 {
		t.Errorf("group %+v, want target size 3 and 3 instances", s)
	}
}

func TestSuspendedInstancesKeepTheirRoom(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{})
	g, _ := newGroup(t, cloud, key, sa, map[string]any{"max_size": 2, "suspend": true})
	g.Increase(ctx, 2)
	l := listing(t, g)
	var id string
	for id = range l {
		break
	}
	if acc, err := g.Suspend(ctx, []string{id}); err != nil || len(acc) != 1 {
		t.Fatalf("Suspend(%s) = %v, %v", id, acc, err)
	}
	if s := cloud.Group(); s.TargetSize != 1 || s.TargetSuspendedSize != 1 {
		t.Fatalf("group %+v after a suspend, want target size 1 and 1 suspended", s)
	}
	// The suspended instance keeps its room: no third instance.
	if n, err := g.Increase(ctx, 1); n != 0 || !errors.Is(err, ErrMaxSize) {
		t.Fatalf("Increase(1) with 1 running and 1 suspended of 2 = %d, %v; want 0, ErrMaxSize", n, err)
	}
	if l := listing(t, g); l[id] != provider.StateSuspended {
		t.Fatalf("listing %v; want %s suspended", l, id)
	}
	if acc, err := g.Resume(ctx, []string{id}); err != nil || len(acc) != 1 {
		t.Fatalf("Resume(%s) = %v, %v", id, acc, err)
	}
	if s := cloud.Group(); s.TargetSize != 2 || s.TargetSuspendedSize != 0 {
		t.Errorf("group %+v after the resume, want target size 2 and none suspended", s)
	}
}

func TestDecreaseDeletesWithoutReplacement(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{StopTime: time.Hour})
	g, _ := newGroup(t, cloud, key, sa, nil)
	g.Increase(ctx, 2)
	l := listing(t, g)
	var ids []string
	for id := range l {
		ids = append(ids, id)
	}
	acc, err := g.Decrease(ctx, ids[:1])
	if err != nil || len(acc) != 1 {
		t.Fatalf("Decrease(%v) = %v, %v", ids[:1], acc, err)
	}
	if s := cloud.Group(); s.TargetSize != 1 || s.Live != 1 {
		t.Errorf("group %+v after deleting one of 2, want target size 1 and 1 live", s)
	}
	if l := listing(t, g); l[ids[0]] != provider.StateDeleting {
		t.Errorf("listing %v; want %s deleting", l, ids[0])
	}
	// Again, while it is still being deleted: accepted, nothing else goes.
	if acc, err := g.Decrease(ctx, ids[:1]); err != nil || len(acc) != 1 {
		t.Errorf("second Decrease = %v, %v; deletes must be idempotent", acc, err)
	}
	if s := cloud.Group(); s.TargetSize != 1 {
		t.Errorf("target size %d after a repeated delete, want 1", s.TargetSize)
	}
}

func TestListingLag(t *testing.T) {
	clock := &manualClock{t: time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)}
	cloud, key, sa := fakeGCP(t, gcpfake.Options{Clock: clock.now, ListingLag: 30 * time.Second, BootTime: time.Minute})
	g, _ := newGroup(t, cloud, key, sa, nil)
	g.now = clock.now
	if n, err := g.Increase(ctx, 2); n != 2 || err != nil {
		t.Fatalf("Increase(2) = %d, %v", n, err)
	}
	if l := listing(t, g); len(l) != 0 {
		t.Fatalf("listing %v right after Increase; the fake's lag should hide the instances", l)
	}
	clock.advance(30 * time.Second)
	if l := listing(t, g); len(l) != 2 || count(l, provider.StateCreating) != 2 {
		t.Fatalf("listing %v after the lag; want 2 creating", l)
	}
	clock.advance(30 * time.Second)
	if l := listing(t, g); count(l, provider.StateRunning) != 2 {
		t.Fatalf("listing %v after boot; want 2 running", l)
	}
}

func TestInstanceReadyTimeout(t *testing.T) {
	clock := &manualClock{t: time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)}
	cloud, key, sa := fakeGCP(t, gcpfake.Options{Clock: clock.now, BootTime: time.Hour})
	g, _ := newGroup(t, cloud, key, sa, map[string]any{"instance_ready_timeout": "5m"})
	g.now = clock.now
	g.Increase(ctx, 1)
	if l := listing(t, g); count(l, provider.StateCreating) != 1 {
		t.Fatalf("listing %v; want 1 creating", l)
	}
	clock.advance(5*time.Minute + time.Second)
	if l := listing(t, g); count(l, provider.StateTimeout) != 1 {
		t.Errorf("listing %v of an instance provisioning past instance_ready_timeout; want timeout", l)
	}
}

func TestPagination(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{PageSize: 2})
	g, _ := newGroup(t, cloud, key, sa, nil)
	g.Increase(ctx, 7)
	before := cloud.Calls("instanceGroupManagers.listManagedInstances")
	if l := listing(t, g); count(l, provider.StateRunning) != 7 {
		t.Fatalf("listing %v; want 7 running across pages", l)
	}
	if pages := cloud.Calls("instanceGroupManagers.listManagedInstances") - before; pages != 4 {
		t.Errorf("%d listManagedInstances calls for 7 instances in pages of 2, want 4", pages)
	}
}

// Rate refusals, 429 and 403 rateLimitExceeded alike, are retried; the
// resize is applied once however often it was sent.
func TestRateLimitIsRetried(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{})
	g, _ := newGroup(t, cloud, key, sa, nil)
	g.retryWait = time.Millisecond
	cloud.Throttle("instanceGroupManagers.resize", 1, http.StatusTooManyRequests)
	cloud.Throttle("instanceGroupManagers.resize", 1, http.StatusForbidden)
	cloud.Throttle("instanceGroupManagers.listManagedInstances", 2, http.StatusTooManyRequests)
	if n, err := g.Increase(ctx, 1); n != 1 || err != nil {
		t.Fatalf("Increase(1) under throttling = %d, %v; want 1, nil", n, err)
	}
	if n := cloud.Calls("instanceGroupManagers.resize"); n != 3 {
		t.Errorf("resize called %d times, want 3 (two refused)", n)
	}
	if l := listing(t, g); count(l, provider.StateRunning) != 1 {
		t.Errorf("listing %v after throttled calls; want 1 running", l)
	}
	if s := cloud.Group(); s.TargetSize != 1 {
		t.Errorf("target size %d, want 1", s.TargetSize)
	}
}

func TestRateLimitBeyondRetriesIsTransient(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{})
	g, _ := newGroup(t, cloud, key, sa, nil)
	g.retryWait = time.Millisecond
	cloud.Throttle("instanceGroupManagers.resize", 10, http.StatusTooManyRequests)
	n, err := g.Increase(ctx, 1)
	if n != 0 || !errors.Is(err, ErrThrottled) || !errors.Is(err, provider.ErrTransient) {
		t.Errorf("Increase under persistent throttling = %d, %v; want 0 and ErrThrottled, transient", n, err)
	}
}

// An operation that ends in a quota error is transient too: berth tries
// again later instead of giving up.
func TestQuotaErrorInOperationIsTransient(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{OperationTime: 100 * time.Millisecond})
	g, _ := newGroup(t, cloud, key, sa, nil)
	cloud.FailOperations("instanceGroupManagers.resize", 1)
	_, err := g.Increase(ctx, 1)
	if !errors.Is(err, provider.ErrTransient) || !strings.Contains(err.Error(), "QUOTA_EXCEEDED") {
		t.Errorf("Increase whose operation failed for quota: %v; want a transient error naming QUOTA_EXCEEDED", err)
	}
	if n := cloud.Calls("zoneOperations.get"); n == 0 {
		t.Error("the operation was never polled")
	}
}

func TestMissingPermissionIsNamed(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{})
	g, _ := newGroup(t, cloud, key, sa, nil)
	for _, c := range []struct {
		method, permission string
		call               func() error
	}{
		{"instanceGroupManagers.resize", "compute.instanceGroupManagers.update", func() error { _, err := g.Increase(ctx, 1); return err }},
		{"instanceGroupManagers.listManagedInstances", "compute.instanceGroupManagers.get", func() error { return g.Update(ctx, func(string, provider.State) {}) }},
	} {
		cloud.Deny(c.method, true)
		err := c.call()
		cloud.Deny(c.method, false)
		if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), c.permission) {
			t.Errorf("with %s denied: %v; want ErrPermission naming %q", c.method, err, c.permission)
		}
	}
}

func TestGroupNotFound(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{})
	g := New()
	_, err := g.Init(ctx, provider.Settings{Config: configFor(t, cloud, key, sa, map[string]any{"name": "no-such-group"})})
	if !errors.Is(err, ErrGroupNotFound) {
		t.Errorf("Init of a missing group: %v; want ErrGroupNotFound", err)
	}
}

func TestBadCredentialsAreRefused(t *testing.T) {
	cloud, key, _ := fakeGCP(t, gcpfake.Options{})
	other, _, otherSA := fakeGCP(t, gcpfake.Options{}) // another project's key: its signature does not verify
	_ = other
	g := New()
	_, err := g.Init(ctx, provider.Settings{Config: configFor(t, cloud, key, otherSA, map[string]any{"credentials_file": otherSA})})
	if err == nil {
		t.Fatal("Init with a key the token endpoint does not know succeeded")
	}
	if !errors.Is(err, ErrCredentials) {
		t.Errorf("Init with a foreign key: %v; want ErrCredentials", err)
	}
}

// A template whose machine type cannot suspend is refused at Init with
// suspend on, before berth parks an environment on it.
func TestSuspendRefusedForMachineTypesThatCannot(t *testing.T) {
	for _, mt := range []string{"a2-highgpu-1g", "m1-megamem-96"} {
		cloud, key, sa := fakeGCP(t, gcpfake.Options{MachineType: mt})
		g := New()
		_, err := g.Init(ctx, provider.Settings{Config: configFor(t, cloud, key, sa, map[string]any{"suspend": true})})
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), mt) {
			t.Errorf("Init with suspend on %s: %v; want ErrUnsupported naming the machine type", mt, err)
		}
		if _, err := New().Init(ctx, provider.Settings{Config: configFor(t, cloud, key, sa, nil)}); err != nil {
			t.Errorf("Init without suspend on %s: %v", mt, err)
		}
	}
}

func TestSuspendUnsupportedUnlessEnabled(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{})
	g, info := newGroup(t, cloud, key, sa, nil)
	if info.Capabilities.Suspend {
		t.Error("Info claims suspend with suspend off")
	}
	if !info.Capabilities.Disposable {
		t.Error("Info does not claim disposable: berth would adopt an unknown running instance as it is")
	}
	g.Increase(ctx, 1)
	for id := range listing(t, g) {
		if _, err := g.Suspend(ctx, []string{id}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Suspend with suspend off: %v; want ErrUnsupported", err)
		}
	}
}

// A preempted Spot VM is recreated by the group under the same name with a
// new ID: berth sees the old instance deleted and a new one.
func TestPreemptedSpotInstanceIsANewInstance(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{Spot: true})
	g, _ := newGroup(t, cloud, key, sa, nil)
	g.Increase(ctx, 1)
	before := listing(t, g)
	if len(before) != 1 {
		t.Fatalf("listing %v, want 1 instance", before)
	}
	if err := cloud.Preempt(cloud.Instances()[0]); err != nil {
		t.Fatal(err)
	}
	after := listing(t, g)
	var old string
	for id := range before {
		old = id
	}
	if after[old] != provider.StateDeleted || len(after) != 2 || count(after, provider.StateRunning) != 1 {
		t.Errorf("listing %v after preempting %s; want it deleted and a new instance running", after, old)
	}
	if _, err := g.ConnectInfo(ctx, old); !errors.Is(err, ErrUnknownInstance) {
		t.Errorf("ConnectInfo of the preempted instance: %v; want ErrUnknownInstance", err)
	}
	// Deleting the old ID must not delete the new VM that took its name.
	if acc, err := g.Decrease(ctx, []string{old}); err != nil || len(acc) != 1 {
		t.Errorf("Decrease of the preempted instance = %v, %v; want it accepted as gone", acc, err)
	}
	if s := cloud.Group(); s.Live != 1 || s.TargetSize != 1 {
		t.Errorf("group %+v after deleting the preempted ID; the recreated VM must live on", s)
	}
}

// Without guest attributes the host key is left empty (berth trusts the
// first key it sees) rather than failing the connection.
func TestNoGuestAttributesLeavesHostKeyEmpty(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{NoGuestAttributes: true})
	g, _ := newGroup(t, cloud, key, sa, nil)
	g.Increase(ctx, 1)
	for id := range listing(t, g) {
		ci, err := g.ConnectInfo(ctx, id)
		if err != nil || ci.HostKey != "" || ci.Addr == "" {
			t.Errorf("ConnectInfo without guest attributes = addr %q host key %q, %v; want an address and no host key", ci.Addr, ci.HostKey, err)
		}
	}
}
