package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/scaler"
)

func TestScrapeShowsFleetAndDecisions(t *testing.T) {
	m := New(func() scaler.Counts {
		return scaler.Counts{
			InstancesByPhase: map[string]int{"ready": 3, "creating": 1},
			Slots:            map[string]int{scaler.SlotIdle: 2, scaler.SlotAcquired: 1},
			Refused:          map[string]int{"max_instances": 7},
			Granted:          11,
		}
	})
	m.Observe(scaler.Scaled{Direction: "up", N: 2})
	m.Observe(scaler.Gone{ID: "i1", Reason: scaler.ReasonIdle})
	m.Observe(scaler.InstanceReady{ID: "i2", After: 100 * time.Millisecond, SinceRequest: 1500 * time.Millisecond})
	m.Observe(scaler.InstanceReady{ID: "adopted", After: 0}) // not requested by berth: not observed
	m.Jobs.WithLabelValues("success").Inc()

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`berth_instances{state="ready"} 3`,
		`berth_slots{state="idle"} 2`,
		`berth_slots{state="acquired"} 1`,
		`berth_reservations_refused_total{reason="max_instances"} 7`,
		`berth_reservations_granted_total 11`,
		`berth_scale_operations_total{direction="up"} 2`,
		`berth_instance_deletions_total{reason="idle_timeout"} 1`,
		`berth_instance_time_to_ready_seconds_count 1`,
		`berth_instance_time_to_ready_seconds_sum 1.5`,
		`berth_jobs_total{result="success"} 1`,
		`berth_job_queue_wait_seconds_bucket`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	return string(body)
}

func noCounts() scaler.Counts { return scaler.Counts{} }

func TestKnownSeriesStartAtZeroAndTheBuildIsLabelled(t *testing.T) {
	body := scrape(t, New(noCounts))
	for _, want := range []string{
		`berth_instance_deletions_total{reason="environment_evicted"} 0`,
		`berth_jobs_total{result="script_failure"} 0`,
		`berth_scale_operations_total{direction="in"} 0`,
		`berth_jobs_queued{source="gitlab"} 0`,
		`berth_instance_seconds_total{phase="suspended"} 0`,
		`berth_provider_call_errors_total{method="increase"} 0`,
		`berth_build_info{commit=`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}

func TestInstanceSecondsIntegrateTheFleetByBillingPhase(t *testing.T) {
	m := New(noCounts)
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	m.Accrue(map[string]int{"ready": 2, "creating": 1, "suspended": 4}, t0)
	// Ten seconds later one booting instance became ready and one suspended
	// instance was deleted: the ten seconds are billed at the old counts.
	m.Accrue(map[string]int{"ready": 3, "suspended": 3}, t0.Add(10*time.Second))
	m.Accrue(map[string]int{"ready": 3, "suspended": 3}, t0.Add(20*time.Second))
	body := scrape(t, m)
	for _, want := range []string{
		`berth_instance_seconds_total{phase="hot"} 50`,
		`berth_instance_seconds_total{phase="booting"} 10`,
		`berth_instance_seconds_total{phase="suspended"} 70`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}
