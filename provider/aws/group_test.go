package aws

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/awsfake"
	"github.com/berth-ci/berth/provider"
)

var ctx = context.Background()

// manualClock is a clock that moves only when told, shared by the fake and
// the provider so that lags and timeouts are stepped, not waited for.
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

func TestIncreaseRaisesDesiredCapacityUpToMaxSize(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{MaxSize: 3})
	g, info := newGroup(t, cloud, key, nil)
	if info.MaxSize != 3 || info.ID != "aws/eu-west-1/berth-ci" {
		t.Errorf("Info = %+v, want MaxSize 3 and ID aws/eu-west-1/berth-ci", info)
	}
	if n, err := g.Increase(ctx, 2); n != 2 || err != nil {
		t.Fatalf("Increase(2) = %d, %v; want 2, nil", n, err)
	}
	n, err := g.Increase(ctx, 5)
	if n != 1 || !errors.Is(err, ErrMaxSize) {
		t.Fatalf("Increase(5) with room for 1 = %d, %v; want 1 and ErrMaxSize", n, err)
	}
	for _, want := range []string{"asked for 5", "added 1", "desired capacity 2", "MaxSize 3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n, err := g.Increase(ctx, 1); n != 0 || !errors.Is(err, ErrMaxSize) {
		t.Errorf("Increase(1) on a full group = %d, %v; want 0 and ErrMaxSize", n, err)
	}
	if d := cloud.Group().Desired; d != 3 {
		t.Errorf("desired capacity %d, want 3", d)
	}
	if l := listing(t, g); count(l, provider.StateRunning) != 3 {
		t.Errorf("listing %v, want 3 running", l)
	}
}

func TestDecreaseTerminatesWithoutReplacement(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{})
	g, _ := newGroup(t, cloud, key, nil)
	g.Increase(ctx, 3)
	ids := cloud.Instances()
	listing(t, g)
	acc, err := g.Decrease(ctx, ids[:2])
	if err != nil || len(acc) != 2 {
		t.Fatalf("Decrease = %v, %v", acc, err)
	}
	if got := cloud.Group(); got.Desired != 1 || got.InGroup != 1 {
		t.Errorf("group after Decrease: %+v; want desired 1 and one instance (no replacements)", got)
	}
	l := listing(t, g)
	if l[ids[0]] != provider.StateDeleted || l[ids[2]] != provider.StateRunning {
		t.Errorf("listing %v: want %s deleted and %s running", l, ids[0], ids[2])
	}
	if _, ok := listing(t, g)[ids[0]]; ok {
		t.Errorf("%s reported deleted twice; once is enough", ids[0])
	}
	// Deletes are idempotent; garbage is refused before AWS is asked.
	if acc, err := g.Decrease(ctx, ids[:1]); err != nil || len(acc) != 1 {
		t.Errorf("second Decrease(%s) = %v, %v; want accepted", ids[0], acc, err)
	}
	calls := cloud.Calls("TerminateInstanceInAutoScalingGroup")
	if acc, err := g.Decrease(ctx, []string{"../etc"}); len(acc) != 0 || !errors.Is(err, ErrUnknownInstance) {
		t.Errorf("Decrease(../etc) = %v, %v; want refused with ErrUnknownInstance", acc, err)
	}
	if cloud.Calls("TerminateInstanceInAutoScalingGroup") != calls {
		t.Error("a malformed ID reached AWS")
	}
	if d := cloud.Group().Desired; d != 1 {
		t.Errorf("desired capacity %d after deleting gone instances, want 1", d)
	}
}

func TestDecreaseBelowMinSizeSaysWhatToChange(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{MinSize: 1})
	g, _ := newGroup(t, cloud, key, nil)
	acc, err := g.Decrease(ctx, cloud.Instances())
	if len(acc) != 0 || !errors.Is(err, ErrMinSize) || !strings.Contains(err.Error(), "MinSize to 0") {
		t.Errorf("Decrease of the group's last instance with MinSize 1 = %v, %v; want ErrMinSize saying to set MinSize to 0", acc, err)
	}
}

// A launched instance the group's eventually consistent listing does not
// show yet is not reported; Increase's return value is what berth counts
// meanwhile.
func TestListingLag(t *testing.T) {
	clock := &manualClock{t: time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)}
	cloud, key := fakeAWS(t, awsfake.Options{Clock: clock.now, ListingLag: 30 * time.Second, BootTime: time.Minute})
	g, _ := newGroup(t, cloud, key, nil)
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
	clock := &manualClock{t: time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)}
	cloud, key := fakeAWS(t, awsfake.Options{Clock: clock.now, BootTime: time.Hour})
	g, _ := newGroup(t, cloud, key, map[string]any{"instance_ready_timeout": "5m"})
	g.now = clock.now
	g.Increase(ctx, 1)
	clock.advance(5*time.Minute + time.Second)
	if l := listing(t, g); count(l, provider.StateTimeout) != 1 {
		t.Errorf("listing %v of an instance pending past instance_ready_timeout; want timeout", l)
	}
}

func TestPagination(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{PageSize: 2, MaxSize: 20})
	g, _ := newGroup(t, cloud, key, nil)
	g.Increase(ctx, 7)
	before := cloud.Calls("DescribeInstances")
	if l := listing(t, g); count(l, provider.StateRunning) != 7 {
		t.Fatalf("listing %v; want 7 running across pages", l)
	}
	if pages := cloud.Calls("DescribeInstances") - before; pages != 4 {
		t.Errorf("%d DescribeInstances calls for 7 instances in pages of 2, want 4", pages)
	}
}

func TestThrottlingIsRetriedBySDK(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{})
	g, _ := newGroup(t, cloud, key, nil)
	g.Increase(ctx, 1)
	cloud.Throttle("DescribeAutoScalingGroups", 1)
	cloud.Throttle("DescribeInstances", 1)
	if l := listing(t, g); count(l, provider.StateRunning) != 1 {
		t.Errorf("listing %v after throttled calls; want 1 running", l)
	}
	if n := cloud.Calls("DescribeInstances"); n < 2 {
		t.Errorf("DescribeInstances called %d times; the throttled call was not retried", n)
	}
}

func TestThrottlingBeyondRetriesIsTyped(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{})
	g, _ := newGroup(t, cloud, key, nil)
	cloud.Throttle("SetDesiredCapacity", 10)
	n, err := g.Increase(ctx, 1)
	if n != 0 || !errors.Is(err, ErrThrottled) {
		t.Errorf("Increase under persistent throttling = %d, %v; want 0 and ErrThrottled", n, err)
	}
}

func TestMissingPermissionIsNamed(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{})
	g, _ := newGroup(t, cloud, key, nil)
	for _, c := range []struct {
		action, permission string
		call               func() error
	}{
		{"SetDesiredCapacity", "autoscaling:SetDesiredCapacity", func() error { _, err := g.Increase(ctx, 1); return err }},
		{"DescribeInstances", "ec2:DescribeInstances", func() error { return g.Update(ctx, func(string, provider.State) {}) }},
	} {
		cloud.Deny(c.action, true)
		err := c.call()
		cloud.Deny(c.action, false)
		if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), `"`+c.permission+`"`) {
			t.Errorf("with %s denied: %v; want ErrPermission naming %q", c.action, err, c.permission)
		}
	}
}

func TestGroupNotFound(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{})
	_, err := New().Init(ctx, provider.Settings{Config: configFor(t, cloud, key, map[string]any{"name": "no-such-group"})})
	if !errors.Is(err, ErrGroupNotFound) || !strings.Contains(err.Error(), "no-such-group") {
		t.Errorf("Init with an unknown group: %v; want ErrGroupNotFound naming it", err)
	}
}

// The group replaces an instance that fails its health check on its own:
// berth sees the old one go and a new one appear.
func TestGroupReplacesUnhealthyInstance(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{})
	g, _ := newGroup(t, cloud, key, nil)
	g.Increase(ctx, 2)
	ids := cloud.Instances()
	listing(t, g)
	if err := cloud.MarkUnhealthy(ids[0]); err != nil {
		t.Fatal(err)
	}
	l := listing(t, g)
	if l[ids[0]] != provider.StateDeleted || l[ids[1]] != provider.StateRunning || len(l) != 3 {
		t.Fatalf("listing %v after %s failed its health check; want it deleted, %s running and a replacement", l, ids[0], ids[1])
	}
	if d := cloud.Group().Desired; d != 2 {
		t.Errorf("desired capacity %d after a replacement, want 2", d)
	}
}

// Every instance berth holds is protected, so lowering the group's desired
// capacity behind berth's back ends no job.
func TestScaleInProtection(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{})
	g, _ := newGroup(t, cloud, key, nil)
	g.Increase(ctx, 3)
	listing(t, g)
	for _, id := range cloud.Instances() {
		if in, _ := cloud.Instance(id); !in.Protected {
			t.Errorf("%s is not protected from scale-in after Update", id)
		}
	}
	cloud.SetDesired(0)
	if l := listing(t, g); count(l, provider.StateRunning) != 3 {
		t.Errorf("listing %v after desired capacity was set to 0 elsewhere; want all 3 still running", l)
	}
}

func TestSuspendResumeKeepsRoomUnderMaxSize(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{MaxSize: 2})
	g, info := newGroup(t, cloud, key, map[string]any{"suspend": true})
	if !info.Capabilities.Suspend {
		t.Fatal("suspend = true but the capability is not advertised")
	}
	g.Increase(ctx, 2)
	ids := cloud.Instances()
	if acc, err := g.Suspend(ctx, ids[:1]); err != nil || len(acc) != 1 {
		t.Fatalf("Suspend = %v, %v", acc, err)
	}
	if in, _ := cloud.Instance(ids[0]); in.Lifecycle != awsfake.LifecycleStandby || in.State != awsfake.EC2Stopped {
		t.Fatalf("suspended instance is %s/%s, want Standby/stopped", in.Lifecycle, in.State)
	}
	if l := listing(t, g); l[ids[0]] != provider.StateSuspended || len(l) != 2 {
		t.Fatalf("listing %v; want %s suspended and no replacement launched", l, ids[0])
	}
	// The parked instance keeps its place under MaxSize.
	if n, err := g.Increase(ctx, 1); n != 0 || !errors.Is(err, ErrMaxSize) || !strings.Contains(err.Error(), "1 in Standby") {
		t.Errorf("Increase with one running and one parked in a group of MaxSize 2 = %d, %v; want 0 and ErrMaxSize counting Standby", n, err)
	}
	if acc, err := g.Resume(ctx, ids[:1]); err != nil || len(acc) != 1 {
		t.Fatalf("Resume = %v, %v", acc, err)
	}
	if l := listing(t, g); l[ids[0]] != provider.StateRunning {
		t.Errorf("listing %v after Resume; want %s running", l, ids[0])
	}
	if got := cloud.Group(); got.Desired != 2 {
		t.Errorf("desired capacity %d after resume, want 2", got.Desired)
	}
}

func TestSuspendUnsupportedUnlessEnabled(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{})
	g, info := newGroup(t, cloud, key, nil)
	if info.Capabilities.Suspend {
		t.Error("suspend capability advertised without suspend = true")
	}
	if !info.Capabilities.Disposable {
		t.Error("Info does not claim disposable: berth would adopt an unknown running instance as it is")
	}
	g.Increase(ctx, 1)
	if _, err := g.Suspend(ctx, cloud.Instances()); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "suspend = true") {
		t.Errorf("Suspend = %v; want ErrUnsupported saying how to enable it", err)
	}
	if cloud.Calls("EnterStandby") != 0 {
		t.Error("an unsupported Suspend reached AWS")
	}
}

func TestEmptyConsoleLeavesHostKeyEmpty(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{Console: awsfake.ConsoleEmpty})
	g, _ := newGroup(t, cloud, key, nil)
	g.Increase(ctx, 1)
	ci, err := g.ConnectInfo(ctx, cloud.Instances()[0])
	if err != nil {
		t.Fatal(err)
	}
	if ci.HostKey != "" || ci.Addr == "" || len(ci.PrivateKey) == 0 {
		t.Errorf("ConnectInfo = %+v; want an address and key but no host key", redacted(ci))
	}
}

func redacted(ci provider.ConnectInfo) provider.ConnectInfo {
	ci.PrivateKey = nil
	return ci
}

func TestNamedProfile(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{})
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte("[ci]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	if _, err := New().Init(ctx, provider.Settings{Config: configFor(t, cloud, key, map[string]any{"profile": "ci"})}); err != nil {
		t.Errorf("Init with profile ci: %v", err)
	}
	_, err := New().Init(ctx, provider.Settings{Config: configFor(t, cloud, key, map[string]any{"profile": "nope"})})
	if !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Init with a missing profile: %v; want ErrCredentials naming it", err)
	}
}

// Without the permission to protect instances the listing still works,
// and the failure is logged once, not on every Update.
func TestProtectionDeniedDoesNotBreakListing(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{})
	g, _ := newGroup(t, cloud, key, nil)
	g.Increase(ctx, 2)
	cloud.Deny("SetInstanceProtection", true)
	for i := 0; i < 2; i++ {
		if l := listing(t, g); count(l, provider.StateRunning) != 2 {
			t.Fatalf("listing %v with SetInstanceProtection denied; want 2 running", l)
		}
	}
	if n := cloud.Calls("SetInstanceProtection"); n != 2 {
		t.Errorf("%d SetInstanceProtection calls in two Updates, want 2 (a denied batch is not retried one by one)", n)
	}
	cloud.Deny("SetInstanceProtection", false)
	listing(t, g)
	for _, id := range cloud.Instances() {
		if in, _ := cloud.Instance(id); !in.Protected {
			t.Errorf("%s unprotected once the permission was granted", id)
		}
	}
}

// A suspend that fails between EnterStandby and StopInstances leaves the
// instance parked but running: listed suspending, and finished by the
// next Suspend without a second EnterStandby.
func TestInterruptedSuspendIsFinishedBySuspend(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{})
	g, _ := newGroup(t, cloud, key, map[string]any{"suspend": true})
	g.Increase(ctx, 1)
	id := cloud.Instances()[0]
	cloud.Deny("StopInstances", true)
	acc, err := g.Suspend(ctx, []string{id})
	if len(acc) != 0 || !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), `"ec2:StopInstances"`) {
		t.Fatalf("Suspend with StopInstances denied = %v, %v; want refused naming ec2:StopInstances", acc, err)
	}
	if l := listing(t, g); l[id] != provider.StateSuspending {
		t.Fatalf("listing %v; want %s suspending (in Standby, still running)", l, id)
	}
	cloud.Deny("StopInstances", false)
	if acc, err := g.Suspend(ctx, []string{id}); err != nil || len(acc) != 1 {
		t.Fatalf("second Suspend = %v, %v", acc, err)
	}
	if l := listing(t, g); l[id] != provider.StateSuspended {
		t.Errorf("listing %v; want %s suspended", l, id)
	}
	if n := cloud.Calls("EnterStandby"); n != 1 {
		t.Errorf("EnterStandby called %d times, want 1", n)
	}
}

// With desired capacity lowered behind berth's back, protected instances
// hold the group above it; Increase counts from them, or the group would
// launch nothing.
func TestIncreaseCountsProtectedInstancesAboveDesired(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{})
	g, _ := newGroup(t, cloud, key, nil)
	g.Increase(ctx, 2)
	listing(t, g) // protects them
	cloud.SetDesired(0)
	if n, err := g.Increase(ctx, 1); n != 1 || err != nil {
		t.Fatalf("Increase(1) = %d, %v", n, err)
	}
	if got := cloud.Group(); got.Desired != 3 || got.InGroup != 3 {
		t.Errorf("group %+v; want desired 3 and a third instance launched", got)
	}
	// And deletes still work when desired is below what the group holds
	// and cannot be decremented: nothing replaces what berth removes.
	cloud.SetDesired(0)
	ids := cloud.Instances()
	if acc, err := g.Decrease(ctx, ids); err != nil || len(acc) != 3 {
		t.Fatalf("Decrease with desired 0 = %v, %v", acc, err)
	}
	if got := cloud.Group(); got.Desired != 0 || got.InGroup != 0 {
		t.Errorf("group %+v after deleting everything; want empty, nothing replaced", got)
	}
}

// A Spot group cannot stop its instances: suspend = true is refused at
// Init, and without it Spot groups work as any other.
func TestSpotGroupCannotSuspend(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{Spot: true})
	_, err := New().Init(ctx, provider.Settings{Config: configFor(t, cloud, key, map[string]any{"suspend": true})})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "Spot") || !strings.Contains(err.Error(), "suspend = false") {
		t.Errorf("Init with suspend on a Spot group: %v; want ErrUnsupported explaining Spot and what to set", err)
	}
	g, info := newGroup(t, cloud, key, nil)
	if info.Capabilities.Suspend {
		t.Error("suspend advertised for a Spot group")
	}
	if n, err := g.Increase(ctx, 1); n != 1 || err != nil {
		t.Errorf("Increase on a Spot group = %d, %v", n, err)
	}
}

// With only fingerprints in the console, the key the server presents is
// used only if it is one of them; anything else may be an interceptor.
func TestHostKeyByFingerprint(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{Console: awsfake.ConsoleFingerprints})
	g, _ := newGroup(t, cloud, key, nil)
	g.Increase(ctx, 1)
	id := cloud.Instances()[0]
	in, _ := cloud.Instance(id)
	ci, err := g.ConnectInfo(ctx, id)
	if err != nil || ci.HostKey != in.HostKey {
		t.Fatalf("ConnectInfo host key %q, %v; want the instance's %q", ci.HostKey, err, in.HostKey)
	}
	_, err = keyByFingerprint(ctx, ci.Addr, []string{"SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"})
	if err == nil || !strings.Contains(err.Error(), "refusing to trust it") {
		t.Errorf("a host key whose fingerprint the console does not list: %v; want it refused", err)
	}
}

// Issue 19, failure 6: DescribeAutoScalingGroups throttled past the SDK's
// retries at start is a transient error, so that berth retries its start
// instead of exiting.
func TestThrottlingAtInitIsTransient(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{})
	cloud.Throttle("DescribeAutoScalingGroups", 10)
	_, err := New().Init(context.Background(), provider.Settings{Config: configFor(t, cloud, key, nil), StateDir: t.TempDir()})
	if !errors.Is(err, ErrThrottled) || !errors.Is(err, provider.ErrTransient) {
		t.Fatalf("Init under throttling: %v; want ErrThrottled and provider.ErrTransient", err)
	}
}
