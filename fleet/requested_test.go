package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/scaler"
)

// sizedGroup is a sim group that says what it was asked for: its live
// instances, as a cloud group's target size would.
type sizedGroup struct {
	*sim.Group
	asked chan struct{}
}

func (g sizedGroup) RequestedSize(ctx context.Context) (int, error) {
	n := 0
	err := g.Update(ctx, func(_ string, s provider.State) {
		if s != provider.StateDeleting && s != provider.StateDeleted {
			n++
		}
	})
	select {
	case g.asked <- struct{}{}:
	default:
	}
	return n, err
}

// Issue 43, item 2: a manager killed right after "scale up" leaves three
// increases in its store that never reached the provider, with
// max_instances = 3. Before, they counted toward max_instances for
// instance_acquire_timeout (15 min): a job booked after the restart waited
// with nothing starting. The provider's requested size settles them at
// the first listing, and the job gets an instance.
func TestRestoredPhantomIncreasesAreSettledByTheRequestedSize(t *testing.T) {
	cfg := onDemand(0)
	now := time.Now()
	core, _, err := scaler.Restore(cfg, scaler.State{Pending: []time.Time{now, now, now}}, now)
	if err != nil {
		t.Fatal(err)
	}
	group := sizedGroup{sim.New(sim.Config{BootTime: 50 * time.Millisecond}, time.Now), make(chan struct{}, 1)}
	f := New(core, Options{Provider: group, UpdateInterval: 20 * time.Millisecond, TickInterval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	if err := f.Reserve("job-1"); err != nil {
		t.Fatal(err)
	}
	// A guard against a hang, not a timing assertion: without the fix the
	// job waits 15 minutes.
	actx, acancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer acancel()
	acq, err := f.Acquire(actx, "job-1")
	if err != nil {
		t.Fatalf("a job after the restart got no instance (%v): pending=%d", err, f.Counts().Pending)
	}
	if acq.Instance == "" {
		t.Fatalf("acquisition %+v has no instance", acq)
	}
	if p := f.Counts().Pending; p > 0 {
		t.Errorf("%d increases still pending once the job runs", p)
	}
}

// unsizedGroup implements RequestedSizer but cannot say, as the plugin host
// and the metrics wrapper do for a provider without the call.
type unsizedGroup struct {
	*sim.Group
	calls    *atomic.Int32
	listings chan struct{}
}

func (g unsizedGroup) Update(ctx context.Context, fn func(string, provider.State)) error {
	err := g.Group.Update(ctx, fn)
	select {
	case g.listings <- struct{}{}:
	default:
	}
	return err
}

func (g unsizedGroup) RequestedSize(context.Context) (int, error) {
	g.calls.Add(1)
	return 0, fmt.Errorf("plugin x: %w", provider.ErrRequestedSizeUnknown)
}

// A provider that says it cannot tell its requested size is asked once, not
// after every listing: the answer would be the same, and each call would
// cost a round trip to the plugin and a warning.
func TestAnUnknownRequestedSizeIsAskedOnce(t *testing.T) {
	now := time.Now()
	core, _, err := scaler.Restore(onDemand(0), scaler.State{Pending: []time.Time{now}}, now)
	if err != nil {
		t.Fatal(err)
	}
	g := unsizedGroup{sim.New(sim.Config{BootTime: 50 * time.Millisecond}, time.Now), new(atomic.Int32), make(chan struct{})}
	f := New(core, Options{Provider: g, UpdateInterval: 5 * time.Millisecond, TickInterval: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	for range 5 { // the listing after the one that asked has settled it
		<-g.listings
	}
	cancel()
	<-done
	if n := g.calls.Load(); n != 1 {
		t.Errorf("RequestedSize called %d times over 5 listings; want once", n)
	}
}
