package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/berth-ci/berth/provider"
)

// group implements only the required interface; suspendingGroup adds
// Suspender, and notifyingRecycler adds Notifier and Recycler.
type group struct{ failIncrease bool }

func (group) Init(context.Context, provider.Settings) (provider.Info, error) {
	return provider.Info{}, nil
}
func (group) Update(context.Context, func(string, provider.State)) error { return nil }
func (g group) Increase(context.Context, int) (int, error) {
	if g.failIncrease {
		return 0, errors.New("quota exceeded")
	}
	return 1, nil
}
func (group) Decrease(_ context.Context, ids []string) ([]string, error) { return ids, nil }
func (group) ConnectInfo(context.Context, string) (provider.ConnectInfo, error) {
	return provider.ConnectInfo{}, nil
}
func (group) Heartbeat(context.Context, string) error { return nil }
func (group) Shutdown(context.Context) error          { return nil }

type suspendingGroup struct{ group }

func (suspendingGroup) Suspend(_ context.Context, ids []string) ([]string, error) { return ids, nil }
func (suspendingGroup) Resume(_ context.Context, ids []string) ([]string, error)  { return ids, nil }

type notifyingRecycler struct{ group }

func (notifyingRecycler) Notify(func(string, provider.State))   {}
func (notifyingRecycler) Recycle(context.Context, string) error { return nil }

func TestMeterKeepsExactlyTheCapabilitiesOfTheProvider(t *testing.T) {
	m := New(noCounts)
	for _, tc := range []struct {
		name    string
		g       provider.InstanceGroup
		s, n, r bool
	}{
		{"plain", group{}, false, false, false},
		{"suspender", suspendingGroup{}, true, false, false},
		{"notifier and recycler", notifyingRecycler{}, false, true, true},
	} {
		w := m.Meter(tc.g)
		_, s := w.(provider.Suspender)
		_, n := w.(provider.Notifier)
		_, r := w.(provider.Recycler)
		if s != tc.s || n != tc.n || r != tc.r {
			t.Errorf("%s: suspender %v notifier %v recycler %v, want %v %v %v", tc.name, s, n, r, tc.s, tc.n, tc.r)
		}
	}
}

func TestMeterTimesCallsAndCountsErrorsByMethod(t *testing.T) {
	m := New(noCounts)
	ctx := context.Background()
	w := m.Meter(suspendingGroup{group{failIncrease: true}})
	if _, err := w.Increase(ctx, 1); err == nil || err.Error() != "quota exceeded" {
		t.Fatalf("the provider's error must pass through unchanged, got %v", err)
	}
	if _, err := w.(provider.Suspender).Suspend(ctx, []string{"i1"}); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, m)
	for _, want := range []string{
		`berth_provider_call_errors_total{method="increase"} 1`,
		`berth_provider_call_duration_seconds_count{method="increase"} 1`,
		`berth_provider_call_duration_seconds_count{method="suspend"} 1`,
		`berth_provider_call_errors_total{method="suspend"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

type sizedGroup struct{ group }

func (sizedGroup) RequestedSize(context.Context) (int, error) { return 4, nil }

// The metered provider answers RequestedSize whatever it wraps: the
// wrapped provider's size, timed, or provider.ErrRequestedSizeUnknown for
// one that keeps none, which the fleet takes as "cannot say". Before, the
// wrapper hid the capability, so the fleet never asked a cloud plugin.
func TestMeterPassesTheRequestedSize(t *testing.T) {
	m := New(noCounts)
	ctx := context.Background()
	rs, ok := m.Meter(sizedGroup{}).(provider.RequestedSizer)
	if !ok {
		t.Fatal("the metered provider hides RequestedSize")
	}
	if n, err := rs.RequestedSize(ctx); n != 4 || err != nil {
		t.Errorf("RequestedSize = %d, %v; want the provider's 4", n, err)
	}
	if !strings.Contains(scrape(t, m), `berth_provider_call_duration_seconds_count{method="requested_size"} 1`) {
		t.Error("RequestedSize was not timed")
	}
	if _, err := m.Meter(group{}).(provider.RequestedSizer).RequestedSize(ctx); !errors.Is(err, provider.ErrRequestedSizeUnknown) {
		t.Errorf("RequestedSize of a provider without it = %v; want ErrRequestedSizeUnknown", err)
	}
}
