package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/sdk"
)

// resettable is a pool that also recycles and notifies, as the local
// provider does.
type resettable struct {
	pool
	mu       sync.Mutex
	recycled []string
	fn       func(string, sdk.State)
}

func (r *resettable) Init(ctx context.Context, s sdk.Settings) (sdk.Info, error) {
	if strings.Join(s.Private, " ") != "/etc/berth" {
		return sdk.Info{}, errors.New("private paths did not arrive: " + strings.Join(s.Private, " "))
	}
	info, err := r.pool.Init(ctx, s)
	info.Capabilities.Notify, info.Capabilities.Recycle = true, true
	return info, err
}

func (r *resettable) Recycle(_ context.Context, id string) error {
	if id != "a-1" {
		return errors.New("no instance " + id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recycled = append(r.recycled, id)
	return nil
}

func (r *resettable) Notify(fn func(string, sdk.State)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fn = fn
}

func (r *resettable) emit(id string, s sdk.State) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fn == nil {
		return false
	}
	r.fn(id, s)
	return true
}

func TestRecycleAndWatchCrossTheProtocol(t *testing.T) {
	g := &resettable{}
	c := connect(t, g)
	ctx := context.Background()
	info, err := c.Init(ctx, sdk.Settings{Config: []byte(`{"zone":"a"}`), StateDir: "/state", Private: []string{"/etc/berth"}})
	if err != nil {
		t.Fatal(err)
	}
	if !info.Capabilities.Notify || !info.Capabilities.Recycle {
		t.Errorf("Info.Capabilities = %+v; want notify and recycle, which the group claims and implements", info.Capabilities)
	}
	if err := c.Recycle(ctx, "a-1"); err != nil {
		t.Errorf("Recycle(a-1) = %v", err)
	}
	if err := c.Recycle(ctx, "zz"); err == nil || err.Error() != "no instance zz" {
		t.Errorf("Recycle(zz) = %v; want the group's error as it is", err)
	}
	if strings.Join(g.recycled, " ") != "a-1" {
		t.Errorf("the group recycled %v; want a-1", g.recycled)
	}

	wctx, cancel := context.WithCancel(ctx)
	got := make(chan string, 10)
	done := make(chan error, 1)
	go func() { done <- c.Watch(wctx, func(id string, s sdk.State) { got <- id + "=" + string(s) }) }()
	// The stream registers with the group once it is open.
	deadline := time.Now().Add(30 * time.Second)
	for !g.emit("a-2", sdk.StateRunning) {
		if time.Now().After(deadline) {
			t.Fatal("Watch never registered with the group's Notify")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := <-got; n != "a-2=running" {
		t.Errorf("notification = %q; want a-2=running", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Watch ended by its context = %v; want nil", err)
	}
}

// TestWithoutTheCapabilitiesCallsAreUnsupported: a group that implements
// neither Recycler nor Notifier answers UNIMPLEMENTED, exactly as a plugin
// built before the two calls existed does; the client names that.
func TestWithoutTheCapabilitiesCallsAreUnsupported(t *testing.T) {
	c := connect(t, &pool{})
	ctx := context.Background()
	info, err := c.Init(ctx, sdk.Settings{Config: []byte(`{"zone":"a"}`), StateDir: "/state"})
	if err != nil {
		t.Fatal(err)
	}
	if info.Capabilities.Notify || info.Capabilities.Recycle {
		t.Errorf("Info.Capabilities = %+v; want neither notify nor recycle", info.Capabilities)
	}
	if err := c.Recycle(ctx, "a-1"); !errors.Is(err, sdk.ErrRecycleUnsupported) {
		t.Errorf("Recycle on a group without the capability = %v; want ErrRecycleUnsupported", err)
	}
	if err := c.Watch(ctx, func(string, sdk.State) { t.Error("notification from a group that cannot notify") }); !errors.Is(err, sdk.ErrNotifyUnsupported) {
		t.Errorf("Watch on a group without the capability = %v; want ErrNotifyUnsupported", err)
	}
}

// throwaway is a cloud's group: its instances may be deleted and replaced
// at will, and it says so.
type throwaway struct{ pool }

func (g *throwaway) Init(ctx context.Context, s sdk.Settings) (sdk.Info, error) {
	info, err := g.pool.Init(ctx, s)
	info.Capabilities.Disposable = true
	return info, err
}

// TestDisposableCrossesTheProtocol: the claim reaches the host as the group
// made it, and a group that does not make it (the static example, a plugin
// built before the field existed) reads as not disposable, so berth keeps
// adopting its unknown instances as they are.
func TestDisposableCrossesTheProtocol(t *testing.T) {
	ctx := context.Background()
	settings := sdk.Settings{Config: []byte(`{"zone":"a"}`), StateDir: "/state"}
	info, err := connect(t, &throwaway{}).Init(ctx, settings)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Capabilities.Disposable {
		t.Errorf("Info.Capabilities = %+v; want disposable, which the group claims", info.Capabilities)
	}
	info, err = connect(t, &pool{}).Init(ctx, settings)
	if err != nil {
		t.Fatal(err)
	}
	if info.Capabilities.Disposable {
		t.Errorf("Info.Capabilities = %+v; want not disposable from a group that does not claim it", info.Capabilities)
	}
}

// sized is a cloud's group: it keeps the number of instances it was asked
// for, and says so.
type sized struct {
	pool
	claim bool
	err   error
}

func (g *sized) Init(ctx context.Context, s sdk.Settings) (sdk.Info, error) {
	info, err := g.pool.Init(ctx, s)
	info.Capabilities.RequestedSize = g.claim
	return info, err
}

func (g *sized) RequestedSize(context.Context) (int, error) { return 3, g.err }

// TestRequestedSizeCrossesTheProtocol: the size and the capability reach the
// host as the group gives them; a transient cloud error stays transient
// (the host asks again after its next listing); a group without the call,
// which answers exactly as a plugin built before the call existed
// (UNIMPLEMENTED), reads as provider.ErrRequestedSizeUnknown, so the host
// asks no more and settles the restored increases by its listings.
func TestRequestedSizeCrossesTheProtocol(t *testing.T) {
	ctx := context.Background()
	settings := sdk.Settings{Config: []byte(`{"zone":"a"}`), StateDir: "/state"}
	c := connect(t, &sized{claim: true})
	info, err := c.Init(ctx, settings)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Capabilities.RequestedSize {
		t.Errorf("Info.Capabilities = %+v; want requested_size, which the group claims and implements", info.Capabilities)
	}
	if n, err := c.RequestedSize(ctx); n != 3 || err != nil {
		t.Errorf("RequestedSize = %d, %v; want 3", n, err)
	}

	info, err = connect(t, &sized{}).Init(ctx, settings)
	if err != nil || info.Capabilities.RequestedSize {
		t.Errorf("Info.Capabilities = %+v, %v; want no requested_size from a group that does not claim it", info.Capabilities, err)
	}

	c = connect(t, &sized{claim: true, err: fmt.Errorf("instanceGroupManagers.get: 503: %w", provider.ErrTransient)})
	if _, err := c.RequestedSize(ctx); !errors.Is(err, provider.ErrTransient) || errors.Is(err, provider.ErrRequestedSizeUnknown) {
		t.Errorf("RequestedSize on a cloud answering 503 = %v; want ErrTransient", err)
	}

	c = connect(t, &pool{})
	if _, err := c.RequestedSize(ctx); !errors.Is(err, sdk.ErrRequestedSizeUnsupported) || !errors.Is(err, provider.ErrRequestedSizeUnknown) {
		t.Errorf("RequestedSize on a group without it = %v; want ErrRequestedSizeUnsupported, an ErrRequestedSizeUnknown", err)
	}
}
