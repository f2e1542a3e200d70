// Package metrics exposes berth's Prometheus metrics: instances and slots by
// state, refused reservations by reason, scale operations, deletions by
// reason, job queue wait, instance time-to-ready, jobs by result, the
// fleet's instance-seconds by billing phase, provider call latency and
// errors by method, queued jobs by source and the build. Labelled series
// that berth knows in advance start at 0, so rates and alerts work from the
// first scrape.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/berth-ci/berth/internal/buildinfo"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/scaler"
)

// Metrics holds berth's collectors in their own registry.
type Metrics struct {
	reg *prometheus.Registry

	// ScaleOps counts instances requested (direction "up") and idle
	// instances removed (direction "in").
	ScaleOps *prometheus.CounterVec
	// Deletions counts instances that left the fleet, by reason.
	Deletions *prometheus.CounterVec
	// QueueWait observes how long a job waited from submission to start.
	QueueWait prometheus.Histogram
	// TimeToReady observes how long an instance took from berth's request
	// (the Increase) to ready; instances berth did not request are not observed.
	TimeToReady prometheus.Histogram
	// Jobs counts finished jobs by result.
	Jobs *prometheus.CounterVec
	// ProviderRestarts counts restarts of a provider plugin, by plugin name.
	ProviderRestarts *prometheus.CounterVec
	// ProviderCalls observes the latency of provider calls, by method (see Meter).
	ProviderCalls *prometheus.HistogramVec
	// ProviderErrors counts failed provider calls, by method.
	ProviderErrors *prometheus.CounterVec
	// QueuedJobs is the number of jobs waiting for an instance, by source
	// ("queue", "gitlab"); a source that cannot tell stays at 0.
	QueuedJobs *prometheus.GaugeVec
	// Leader is 1 while this manager leads the fleet, else 0 (a standby
	// under [ha]; a single manager sets it once it runs).
	Leader prometheus.Gauge
	// LeaderChanges counts the terms this manager won (docs/ha.md).
	LeaderChanges prometheus.Counter
	// GitLabTokenRotations counts runner token rotations, by GitLab URL
	// and result (ok, failed, unsaved).
	GitLabTokenRotations *prometheus.CounterVec

	cost *instanceSeconds
}

// New registers berth's metrics. counts is called at every scrape for the
// gauges of instances and slots by state and the refused reservations.
func New(counts func() scaler.Counts) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		ScaleOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_scale_operations_total", Help: "Instances asked for (up) or removed as idle (in).",
		}, []string{"direction"}),
		Deletions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_instance_deletions_total", Help: "Instances that left the fleet, by reason.",
		}, []string{"reason"}),
		QueueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_job_queue_wait_seconds", Help: "Time from a job's submission to its start on an instance.",
			Buckets: prometheus.ExponentialBuckets(0.1, 2, 16),
		}),
		TimeToReady: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_instance_time_to_ready_seconds", Help: "Time from berth's request of an instance (the Increase) to its readiness; adopted instances are not observed.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 16),
		}),
		Jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_jobs_total", Help: "Finished jobs by result.",
		}, []string{"result"}),
		ProviderRestarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_provider_restarts_total", Help: "Restarts of the provider plugin after it crashed, hung or broke its connection.",
		}, []string{"provider"}),
	}
	m.ProviderCalls, m.ProviderErrors = newProviderCollectors()
	m.QueuedJobs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "berth_jobs_queued", Help: "Jobs waiting to be booked on a new instance, by source (a source that cannot tell, like GitLab, stays at 0).",
	}, []string{"source"})
	m.Leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "berth_leader", Help: "1 while this manager leads the fleet, 0 while it stands by ([ha]).",
	})
	m.LeaderChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "berth_leadership_changes_total", Help: "Terms this manager won as leader of the fleet ([ha]).",
	})
	m.GitLabTokenRotations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_gitlab_token_rotations_total", Help: "Runner token rotations before token_expires_at, by GitLab URL and result: ok, failed (GitLab did not reset it; retried), unsaved (reset, token_file not written; retried).",
	}, []string{"gitlab", "result"})
	m.cost = newInstanceSeconds()
	m.preinitialise()
	m.reg.MustRegister(m.ScaleOps, m.Deletions, m.QueueWait, m.TimeToReady, m.Jobs, m.ProviderRestarts,
		m.ProviderCalls, m.ProviderErrors, m.QueuedJobs, m.Leader, m.LeaderChanges, m.GitLabTokenRotations, m.cost.vec, newBuildInfo(buildinfo.Read()),
		&fleetCollector{counts: counts},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// deletionReasons are the reasons the core gives when an instance leaves.
var deletionReasons = []scaler.Reason{scaler.ReasonIdle, scaler.ReasonMaxUse, scaler.ReasonHeartbeat,
	scaler.ReasonReadyHook, scaler.ReasonNotReady, scaler.ReasonProviderTimeout, scaler.ReasonEnvExpired,
	scaler.ReasonUnclaimed, scaler.ReasonUnknown, scaler.ReasonDeadJob, scaler.ReasonSuspendFailed,
	scaler.ReasonShutdown, scaler.ReasonRemovedByProvider, scaler.ReasonSuspendedIdle,
	scaler.ReasonResumeFailed, scaler.ReasonEnvEvicted, scaler.ReasonResetFailed, scaler.ReasonOperator,
	scaler.ReasonReplacedUnknown}

// preinitialise creates every labelled series berth knows in advance at 0.
func (m *Metrics) preinitialise() {
	for _, d := range []string{"up", "in"} {
		m.ScaleOps.WithLabelValues(d)
	}
	for _, r := range deletionReasons {
		m.Deletions.WithLabelValues(string(r))
	}
	m.Jobs.WithLabelValues("success")
	for _, f := range []jobsource.FailureKind{jobsource.FailureScript, jobsource.FailureSystem,
		jobsource.FailureTimeout, jobsource.FailureCanceled} {
		m.Jobs.WithLabelValues(string(f))
	}
	for _, s := range []string{"queue", "gitlab"} {
		m.QueuedJobs.WithLabelValues(s)
	}
}

// Accrue adds the fleet's instance-seconds since the last call, by billing
// phase; the daemon calls it every second with the core's counts.
func (m *Metrics) Accrue(byPhase map[string]int, now time.Time) { m.cost.Accrue(byPhase, now) }

// newBuildInfo is berth_build_info: always 1, the build in its labels, so a
// dashboard can show which version runs and join it to other series.
func newBuildInfo(i buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "berth_build_info", Help: "Always 1; the labels say which berth build is running.",
		ConstLabels: prometheus.Labels{"version": i.Version, "commit": i.Commit, "date": i.Date, "goversion": i.GoVersion},
	})
	g.Set(1)
	return g
}

// Observe records what a core action says about the fleet.
func (m *Metrics) Observe(a scaler.Action) {
	switch a := a.(type) {
	case scaler.Scaled:
		m.ScaleOps.WithLabelValues(a.Direction).Add(float64(a.N))
	case scaler.Gone:
		m.Deletions.WithLabelValues(string(a.Reason)).Inc()
	case scaler.InstanceReady:
		// From the request, as the help says: the first listing comes late
		// in the boot, so time since then reads close to 0.
		if a.SinceRequest > 0 {
			m.TimeToReady.Observe(a.SinceRequest.Seconds())
		}
	}
}

// Handler serves /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

var (
	instancesDesc = prometheus.NewDesc("berth_instances", "Instances by the scaler's phase.", []string{"state"}, nil)
	slotsDesc     = prometheus.NewDesc("berth_slots", "Slots by state.", []string{"state"}, nil)
	pendingDesc   = prometheus.NewDesc("berth_instances_pending", "Instances requested but not yet listed by the provider.", nil, nil)
	refusedDesc   = prometheus.NewDesc("berth_reservations_refused_total", "Refused reservations by reason.", []string{"reason"}, nil)
	grantedDesc   = prometheus.NewDesc("berth_reservations_granted_total", "Granted reservations (bookings).", nil, nil)
	envsDesc      = prometheus.NewDesc("berth_environments_suspended", "Parked (suspended) job environments.", nil, nil)
)

// fleetCollector reads the core's counts at scrape time, so gauges are
// always one consistent snapshot.
type fleetCollector struct{ counts func() scaler.Counts }

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- instancesDesc
	ch <- slotsDesc
	ch <- pendingDesc
	ch <- refusedDesc
	ch <- envsDesc
	ch <- grantedDesc
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	cs := c.counts()
	for state, n := range cs.InstancesByPhase {
		ch <- prometheus.MustNewConstMetric(instancesDesc, prometheus.GaugeValue, float64(n), state)
	}
	for _, state := range []string{scaler.SlotIdle, scaler.SlotReserved, scaler.SlotAcquired, scaler.SlotSuspended, scaler.SlotUnavailable} {
		ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(cs.Slots[state]), state)
	}
	ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(cs.Pending))
	for _, reason := range []string{"no_idle_slot", "max_instances"} {
		ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.CounterValue, float64(cs.Refused[reason]), reason)
	}
	ch <- prometheus.MustNewConstMetric(envsDesc, prometheus.GaugeValue, float64(cs.Environments))
	ch <- prometheus.MustNewConstMetric(grantedDesc, prometheus.CounterValue, float64(cs.Granted))
}
