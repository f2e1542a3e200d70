package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-ci/berth/scaler"
)

// TestDashboardQueriesOnlyMetricsBerthExports keeps the Grafana dashboard
// in packaging/ from drifting: every berth_ series it queries must be one
// that /metrics serves.
func TestDashboardQueriesOnlyMetricsBerthExports(t *testing.T) {
	raw, err := os.ReadFile("../packaging/grafana/berth-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	m := New(func() scaler.Counts { return scaler.Counts{InstancesByPhase: map[string]int{"ready": 1}} })
	m.ProviderRestarts.WithLabelValues("aws") // labelled by plugin: berth creates it when a plugin starts
	body := scrape(t, m)
	name := regexp.MustCompile(`berth_[a-z_]+`)
	queried := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			for _, series := range name.FindAllString(tg.Expr, -1) {
				queried++
				base := series
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					base = strings.TrimSuffix(base, suffix)
				}
				if !strings.Contains(body, "# TYPE "+base+" ") {
					t.Errorf("panel %q queries %s, which berth does not export", p.Title, series)
				}
			}
		}
	}
	if queried < 10 {
		t.Fatalf("found only %d queried series; is the dashboard's shape still panels[].targets[].expr?", queried)
	}
}
