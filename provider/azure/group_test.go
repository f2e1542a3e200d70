package azure

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/azurefake"
	"github.com/berth-ci/berth/provider"
)

// eventually polls cond until it holds, failing after a generous deadline;
// it asserts no timing, only that the state is reached.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var quick = azurefake.Options{PollInterval: 20 * time.Millisecond, RetryAfter: 20 * time.Millisecond}

func TestIncreaseRaisesCapacityUpToMaxSize(t *testing.T) {
	f := fakeAzure(t, quick)
	g, info := f.newGroup(t, map[string]any{"max_size": 3})
	if info.MaxSize != 3 {
		t.Errorf("Info.MaxSize = %d, want max_size 3", info.MaxSize)
	}
	if n, err := g.Increase(context.Background(), 2); n != 2 || err != nil {
		t.Fatalf("Increase(2) = %d, %v", n, err)
	}
	n, err := g.Increase(context.Background(), 2)
	if n != 1 || !errors.Is(err, ErrMaxSize) || !strings.Contains(err.Error(), "capacity 2") {
		t.Fatalf("Increase(2) at capacity 2 of 3 = %d, %v; want 1 and ErrMaxSize with the numbers", n, err)
	}
	if c := f.Capacity(); c != 3 {
		t.Errorf("capacity %d, want 3", c)
	}
}

// A suspended (deallocated) instance still counts against the capacity,
// so its room stays its own.
func TestSuspendedInstancesKeepTheirRoom(t *testing.T) {
	f := fakeAzure(t, quick)
	g, _ := f.newGroup(t, map[string]any{"max_size": 2, "suspend": true})
	g.Increase(context.Background(), 2)
	eventually(t, "two running", func() bool { return count(listing(t, g), provider.StateRunning) == 2 })
	id := f.Options().ScaleSet + "_0"
	if acc, err := g.Suspend(context.Background(), []string{id}); err != nil || len(acc) != 1 {
		t.Fatalf("Suspend = %v, %v", acc, err)
	}
	eventually(t, id+" suspended", func() bool { return listing(t, g)[id] == provider.StateSuspended })
	if n, err := g.Increase(context.Background(), 1); n != 0 || !errors.Is(err, ErrMaxSize) {
		t.Errorf("Increase with one running and one suspended of max_size 2 = %d, %v; want 0, ErrMaxSize", n, err)
	}
	if acc, err := g.Resume(context.Background(), []string{id}); err != nil || len(acc) != 1 {
		t.Fatalf("Resume = %v, %v", acc, err)
	}
	if st := listing(t, g)[id]; st != provider.StateRunning {
		t.Errorf("after Resume returned %s is %s, want running", id, st)
	}
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

// deleteInstances lowers the capacity: nothing replaces what berth removed.
func TestDecreaseDeletesWithoutReplacement(t *testing.T) {
	f := fakeAzure(t, quick)
	g, _ := f.newGroup(t, nil)
	g.Increase(context.Background(), 3)
	eventually(t, "three listed", func() bool { return len(listing(t, g)) == 3 })
	name := f.Options().ScaleSet
	acc, err := g.Decrease(context.Background(), []string{name + "_1", "other-set_0", name + "_9"})
	if len(acc) != 2 || !errors.Is(err, ErrUnknownInstance) || !strings.Contains(err.Error(), "other-set_0") {
		t.Fatalf("Decrease = %v, %v; want %s_1 and the unknown %s_9 accepted, other-set_0 refused", acc, err, name, name)
	}
	if c := f.Capacity(); c != 2 {
		t.Errorf("capacity %d after deleting one of three, want 2", c)
	}
	eventually(t, "the deleted instance reported deleted", func() bool { return listing(t, g)[name+"_1"] == provider.StateDeleted })
	if l := listing(t, g); len(l) != 2 {
		t.Errorf("listing %v after the delete was reported; want the two others", l)
	}
	if n := len(f.Instances()); n != 3 {
		t.Errorf("%d instances launched in all, want 3: a delete was replaced", n)
	}
}

// An instance the set created but does not list yet is not reported; once
// listed it is, and no second Increase was needed for it.
func TestListingLag(t *testing.T) {
	opts := quick
	opts.ListingLag = time.Hour
	f := fakeAzure(t, opts)
	g, _ := f.newGroup(t, nil)
	g.Increase(context.Background(), 1)
	if l := listing(t, g); len(l) != 0 {
		t.Fatalf("listing %v during the listing lag, want nothing", l)
	}
	if len(f.Live()) != 1 {
		t.Fatalf("the set holds %v, want one instance", f.Live())
	}
}

func TestInstanceReadyTimeout(t *testing.T) {
	opts := quick
	opts.BootTime = time.Hour
	f := fakeAzure(t, opts)
	g, _ := f.newGroup(t, map[string]any{"instance_ready_timeout": "50ms"})
	g.Increase(context.Background(), 1)
	eventually(t, "the instance timed out", func() bool { return count(listing(t, g), provider.StateTimeout) == 1 })
}

func TestPagination(t *testing.T) {
	opts := quick
	opts.PageSize = 2
	f := fakeAzure(t, opts)
	g, _ := f.newGroup(t, nil)
	g.Increase(context.Background(), 5)
	eventually(t, "five listed across three pages", func() bool { return count(listing(t, g), provider.StateRunning) == 5 })
}

// 429s with Retry-After are retried by the SDK; more than its retries
// give ErrThrottled, which is transient.
func TestThrottling(t *testing.T) {
	f := fakeAzure(t, quick)
	g, _ := f.newGroup(t, nil)
	f.Throttle("ListVMs", 2)
	listing(t, g)
	if n := f.Calls("ListVMs"); n != 3 {
		t.Errorf("ListVMs called %d times for two 429s, want 3", n)
	}
	f.Throttle("ListVMs", 10)
	err := g.Update(context.Background(), func(string, provider.State) {})
	if !errors.Is(err, ErrThrottled) || !errors.Is(err, provider.ErrTransient) {
		t.Errorf("Update throttled beyond retries: %v; want ErrThrottled and provider.ErrTransient", err)
	}
}

// Throttled at Init is transient too, so berth waits instead of exiting.
func TestThrottlingAtInitIsTransient(t *testing.T) {
	f := fakeAzure(t, quick)
	f.Throttle("GetScaleSet", 10)
	_, err := New().Init(context.Background(), provider.Settings{Config: f.config(t, nil)})
	if !errors.Is(err, provider.ErrTransient) {
		t.Errorf("Init throttled: %v; want provider.ErrTransient", err)
	}
}

func TestMissingPermissionIsNamed(t *testing.T) {
	f := fakeAzure(t, quick)
	g, _ := f.newGroup(t, nil)
	f.Deny("UpdateScaleSet", true)
	_, err := g.Increase(context.Background(), 1)
	if !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), `"Microsoft.Compute/virtualMachineScaleSets/write"`) {
		t.Errorf("Increase without write: %v; want ErrPermission naming the action", err)
	}
}

func TestWrongSecretIsACredentialError(t *testing.T) {
	f := fakeAzure(t, quick)
	t.Setenv("AZURE_CLIENT_SECRET", "wrong")
	_, err := New().Init(context.Background(), provider.Settings{Config: f.config(t, nil)})
	if !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), "AADSTS7000215") {
		t.Errorf("Init with a wrong secret: %v; want ErrCredentials with Entra's reason", err)
	}
}

func TestScaleSetNotFound(t *testing.T) {
	f := fakeAzure(t, quick)
	_, err := New().Init(context.Background(), provider.Settings{Config: f.config(t, map[string]any{"name": "nope"})})
	if !errors.Is(err, ErrScaleSetNotFound) {
		t.Errorf("Init of a missing set: %v; want ErrScaleSetNotFound", err)
	}
}

// A key that is not in the OS profile fails at Init, naming both.
func TestKeyNotInOSProfile(t *testing.T) {
	f := fakeAzure(t, quick)
	other := fakeAzure(t, quick) // another key
	_, err := New().Init(context.Background(), provider.Settings{Config: f.config(t, map[string]any{"connector": map[string]any{"key_path": other.keyPath}})})
	if err == nil || !strings.Contains(err.Error(), "not one of the SSH public keys") {
		t.Errorf("Init with a foreign key: %v", err)
	}
}

// Spot with eviction policy Deallocate would make evicted instances look
// suspended: refused. With Delete, an evicted instance leaves the set.
func TestSpotEvictionPolicy(t *testing.T) {
	opts := quick
	opts.Spot, opts.EvictionPolicy = true, "Deallocate"
	f := fakeAzure(t, opts)
	_, err := New().Init(context.Background(), provider.Settings{Config: f.config(t, nil)})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "eviction policy") {
		t.Errorf("Init of a Spot set with Deallocate eviction: %v", err)
	}
}

// A start that fails for lack of capacity leaves the instance suspended,
// with an error that says so and is transient.
func TestResumeAllocationFailure(t *testing.T) {
	f := fakeAzure(t, quick)
	g, _ := f.newGroup(t, map[string]any{"suspend": true})
	g.Increase(context.Background(), 1)
	id := f.Options().ScaleSet + "_0"
	eventually(t, "running", func() bool { return listing(t, g)[id] == provider.StateRunning })
	g.Suspend(context.Background(), []string{id})
	eventually(t, "suspended", func() bool { return listing(t, g)[id] == provider.StateSuspended })
	f.FailNext("Start", "AllocationFailed", "Allocation failed. We do not have sufficient capacity for the requested VM size in this region.")
	acc, err := g.Resume(context.Background(), []string{id})
	if len(acc) != 0 || !errors.Is(err, ErrStockout) || !errors.Is(err, provider.ErrTransient) {
		t.Fatalf("Resume with no capacity = %v, %v; want ErrStockout, transient", acc, err)
	}
	if st := listing(t, g)[id]; st != provider.StateSuspended {
		t.Errorf("after a failed start %s is %s, want suspended", id, st)
	}
}

func TestSuspendUnsupportedUnlessEnabled(t *testing.T) {
	f := fakeAzure(t, quick)
	g, info := f.newGroup(t, nil)
	if info.Capabilities.Suspend {
		t.Error("suspend capability claimed with suspend off")
	}
	if !info.Capabilities.Disposable {
		t.Error("Info does not claim disposable: berth would adopt an unknown running instance as it is")
	}
	if _, err := g.Suspend(context.Background(), []string{"berth-ci_0"}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Suspend with suspend off: %v", err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	os.WriteFile(key, nil, 0o600)
	for _, c := range []struct{ cfg, want string }{
		{``, "provider_config is empty"},
		{`{"resource_group": "r", "name": "n", "connector": {"key_path": "k"}}`, "no subscription"},
		{`{"subscription_id": "s", "name": "n", "connector": {"key_path": "k"}}`, "resource_group is empty"},
		{`{"subscription_id": "s", "resource_group": "r", "connector": {"key_path": "k"}}`, "name is empty"},
		{`{"subscription_id": "s", "resource_group": "r", "name": "n"}`, "connector.key_path is empty"},
		{`{"subscription_id": "s", "resource_group": "r", "name": "n", "connector": {"key_path": "k"}, "endpoint": "http://x"}`, "https://"},
		{`{"subscription_id": "s", "resource_group": "r", "name": "n", "connector": {"key_path": "k"}, "cloud": "mars"}`, "cloud \"mars\""},
		{`{"subscription_id": "s", "resource_group": "r", "name": "n", "connector": {"key_path": "k"}, "regoin": "x"}`, "known keys"},
	} {
		t.Setenv("AZURE_SUBSCRIPTION_ID", "")
		_, err := ParseConfig([]byte(c.cfg))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseConfig(%s) = %v, want an error with %q", c.cfg, err, c.want)
		}
	}
}

func TestMapState(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		prov, power string
		op          op
		age         time.Duration
		want        provider.State
	}{
		{"creating", "starting", opNone, 0, provider.StateCreating},
		{"creating", "", opNone, time.Hour, provider.StateTimeout},
		{"creating", "running", opNone, 0, provider.StateCreating},
		{"succeeded", "running", opNone, 0, provider.StateRunning},
		{"succeeded", "running", opSuspend, 0, provider.StateSuspending},
		{"updating", "deallocating", opNone, 0, provider.StateSuspending},
		{"succeeded", "stopped", opNone, 0, provider.StateSuspending},
		{"succeeded", "deallocated", opNone, 0, provider.StateSuspended},
		{"failed", "deallocated", opNone, 0, provider.StateSuspended},
		{"succeeded", "deallocated", opResume, 0, provider.StateResuming},
		{"updating", "starting", opNone, time.Hour, provider.StateResuming},
		{"deleting", "running", opNone, 0, provider.StateDeleting},
		{"failed", "running", opNone, 0, provider.StateTimeout},
	} {
		s := vmState{provisioning: c.prov, power: c.power, created: now.Add(-c.age)}
		if got := mapState(s, c.op, now, 10*time.Minute); got != c.want {
			t.Errorf("mapState(%s, %s, op %d, age %v) = %s, want %s", c.prov, c.power, c.op, c.age, got, c.want)
		}
	}
}

func TestHostKeysIn(t *testing.T) {
	ed := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
	log := "boot\n-----BEGIN SSH HOST KEY KEYS-----\n" + ed + " root@x\n-----END SSH HOST KEY KEYS-----\n"
	if got := hostKeysIn(log); len(got) != 1 || got[0] != ed {
		t.Errorf("hostKeysIn = %v, want [%s]", got, ed)
	}
	withFP := "-----BEGIN SSH HOST KEY FINGERPRINTS-----\n256 SHA256:notthisone root@x (ED25519)\n-----END SSH HOST KEY FINGERPRINTS-----\n" + log
	if got := hostKeysIn(withFP); len(got) != 0 {
		t.Errorf("a key missing from the fingerprint block was kept: %v", got)
	}
	if got := hostKeysIn("no cloud-init here"); len(got) != 0 {
		t.Errorf("hostKeysIn of a log without keys = %v", got)
	}
}

func TestArch(t *testing.T) {
	for size, want := range map[string]string{"Standard_D2s_v5": "amd64", "Standard_D2ps_v5": "arm64", "Standard_E4pds_v6": "arm64",
		"Standard_B2pts_v2": "arm64", "Standard_F2s_v2": "amd64", "": "amd64"} {
		if got := arch(size); got != want {
			t.Errorf("arch(%q) = %s, want %s", size, got, want)
		}
	}
}

// A Spot instance evicted (policy Delete) leaves the set: berth sees it
// deleted, and the set launches nothing in its place on its own.
func TestSpotEvictionIsADeletion(t *testing.T) {
	opts := quick
	opts.Spot = true
	f := fakeAzure(t, opts)
	g, _ := f.newGroup(t, nil)
	g.Increase(context.Background(), 2)
	id := f.Options().ScaleSet + "_0"
	eventually(t, "two running", func() bool { return count(listing(t, g), provider.StateRunning) == 2 })
	if err := f.Evict(id); err != nil {
		t.Fatal(err)
	}
	eventually(t, id+" reported deleted", func() bool { return listing(t, g)[id] == provider.StateDeleted })
	if c, n := f.Capacity(), len(f.Instances()); c != 1 || n != 2 {
		t.Errorf("after the eviction: capacity %d, %d launched in all; want 1 and 2", c, n)
	}
	if _, err := g.ConnectInfo(context.Background(), id); !errors.Is(err, ErrUnknownInstance) {
		t.Errorf("ConnectInfo of the evicted instance: %v; want ErrUnknownInstance", err)
	}
}

// A resume supersedes a deallocation whose poller has not yet seen it end:
// once Resume returned, the instance is listed running, not suspending.
func TestResumeSupersedesADeallocationStillPolled(t *testing.T) {
	f := fakeAzure(t, quick)
	g, _ := f.newGroup(t, map[string]any{"suspend": true})
	g.Increase(context.Background(), 1)
	id := f.Options().ScaleSet + "_0"
	eventually(t, "running", func() bool { return listing(t, g)[id] == provider.StateRunning })
	g.Suspend(context.Background(), []string{id})
	eventually(t, "suspended", func() bool { return listing(t, g)[id] == provider.StateSuspended })
	g.mu.Lock()
	g.suspending[id] = -1 // a deallocation poller that has not noticed the end yet
	g.mu.Unlock()
	if acc, err := g.Resume(context.Background(), []string{id}); err != nil || len(acc) != 1 {
		t.Fatalf("Resume = %v, %v", acc, err)
	}
	if st := listing(t, g)[id]; st != provider.StateRunning {
		t.Errorf("after Resume returned, %s is %s; want running", id, st)
	}
}
