package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-ci/berth/provider"
)

// providerMethods are the provider calls berth times, pre-initialised so a
// dashboard shows 0 rather than no series before the first call.
var providerMethods = []string{"init", "update", "increase", "decrease", "connect_info", "heartbeat", "shutdown", "suspend", "resume", "recycle", "requested_size"}

func newProviderCollectors() (*prometheus.HistogramVec, *prometheus.CounterVec) {
	calls := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "berth_provider_call_duration_seconds", Help: "Latency of calls to the provider, by method (errors included).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
	}, []string{"method"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_provider_call_errors_total", Help: "Calls to the provider that returned an error, by method.",
	}, []string{"method"})
	for _, m := range providerMethods {
		calls.WithLabelValues(m)
		errs.WithLabelValues(m)
	}
	return calls, errs
}

// Meter wraps g so that every call to it is timed and its errors counted.
// The wrapper implements exactly the optional interfaces (Suspender,
// Notifier, Recycler) that g does, because berth finds a provider's
// capabilities by type assertion. RequestedSizer is the exception: every
// wrapper has RequestedSize, which answers provider.ErrRequestedSizeUnknown
// when g lacks it, so that the fleet, which takes that answer as "cannot
// say", needs no fourth dimension in the switch below.
func (m *Metrics) Meter(g provider.InstanceGroup) provider.InstanceGroup {
	b := &meteredGroup{g: g, m: m}
	s, isS := g.(provider.Suspender)
	n, isN := g.(provider.Notifier)
	r, isR := g.(provider.Recycler)
	ms, mr := &meteredSuspender{s: s, m: m}, &meteredRecycler{r: r, m: m}
	switch {
	case isS && isN && isR:
		return struct {
			*meteredGroup
			*meteredSuspender
			provider.Notifier
			*meteredRecycler
		}{b, ms, n, mr}
	case isS && isN:
		return struct {
			*meteredGroup
			*meteredSuspender
			provider.Notifier
		}{b, ms, n}
	case isS && isR:
		return struct {
			*meteredGroup
			*meteredSuspender
			*meteredRecycler
		}{b, ms, mr}
	case isN && isR:
		return struct {
			*meteredGroup
			provider.Notifier
			*meteredRecycler
		}{b, n, mr}
	case isS:
		return struct {
			*meteredGroup
			*meteredSuspender
		}{b, ms}
	case isN:
		return struct {
			*meteredGroup
			provider.Notifier
		}{b, n}
	case isR:
		return struct {
			*meteredGroup
			*meteredRecycler
		}{b, mr}
	}
	return b
}

// record observes one call that started at start.
func (m *Metrics) record(method string, start time.Time, err error) {
	m.ProviderCalls.WithLabelValues(method).Observe(time.Since(start).Seconds())
	if err != nil {
		m.ProviderErrors.WithLabelValues(method).Inc()
	}
}

type meteredGroup struct {
	g provider.InstanceGroup
	m *Metrics
}

func (w *meteredGroup) Init(ctx context.Context, s provider.Settings) (provider.Info, error) {
	start := time.Now()
	info, err := w.g.Init(ctx, s)
	w.m.record("init", start, err)
	return info, err
}

func (w *meteredGroup) Update(ctx context.Context, fn func(id string, s provider.State)) error {
	start := time.Now()
	err := w.g.Update(ctx, fn)
	w.m.record("update", start, err)
	return err
}

func (w *meteredGroup) Increase(ctx context.Context, n int) (int, error) {
	start := time.Now()
	got, err := w.g.Increase(ctx, n)
	w.m.record("increase", start, err)
	return got, err
}

func (w *meteredGroup) Decrease(ctx context.Context, ids []string) ([]string, error) {
	start := time.Now()
	got, err := w.g.Decrease(ctx, ids)
	w.m.record("decrease", start, err)
	return got, err
}

func (w *meteredGroup) ConnectInfo(ctx context.Context, id string) (provider.ConnectInfo, error) {
	start := time.Now()
	ci, err := w.g.ConnectInfo(ctx, id)
	w.m.record("connect_info", start, err)
	return ci, err
}

func (w *meteredGroup) Heartbeat(ctx context.Context, id string) error {
	start := time.Now()
	err := w.g.Heartbeat(ctx, id)
	w.m.record("heartbeat", start, err)
	return err
}

// RequestedSize implements provider.RequestedSizer for every provider: g's
// answer, timed, or provider.ErrRequestedSizeUnknown when g keeps none.
func (w *meteredGroup) RequestedSize(ctx context.Context) (int, error) {
	rs, ok := w.g.(provider.RequestedSizer)
	if !ok {
		return 0, provider.ErrRequestedSizeUnknown
	}
	start := time.Now()
	n, err := rs.RequestedSize(ctx)
	w.m.record("requested_size", start, err)
	return n, err
}

func (w *meteredGroup) Shutdown(ctx context.Context) error {
	start := time.Now()
	err := w.g.Shutdown(ctx)
	w.m.record("shutdown", start, err)
	return err
}

type meteredSuspender struct {
	s provider.Suspender
	m *Metrics
}

func (w *meteredSuspender) Suspend(ctx context.Context, ids []string) ([]string, error) {
	start := time.Now()
	got, err := w.s.Suspend(ctx, ids)
	w.m.record("suspend", start, err)
	return got, err
}

func (w *meteredSuspender) Resume(ctx context.Context, ids []string) ([]string, error) {
	start := time.Now()
	got, err := w.s.Resume(ctx, ids)
	w.m.record("resume", start, err)
	return got, err
}

type meteredRecycler struct {
	r provider.Recycler
	m *Metrics
}

func (w *meteredRecycler) Recycle(ctx context.Context, id string) error {
	start := time.Now()
	err := w.r.Recycle(ctx, id)
	w.m.record("recycle", start, err)
	return err
}
