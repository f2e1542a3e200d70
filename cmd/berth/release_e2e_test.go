package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestJSONLogsCoverEveryLineBerthWrites runs berth with log_format = "json":
// every line it writes, the local provider's included, must be one JSON
// object a log shipper can parse, and log_level must reach the provider.
func TestJSONLogsCoverEveryLineBerthWrites(t *testing.T) {
	d := newDaemon(t, `log_format = "json"
log_level = "info"
`)
	d.waitJobs(time.Minute, d.submit("--", "echo hi"))
	d.stop()
	lines := strings.Split(strings.TrimSpace(d.log.String()), "\n")
	fromProvider := 0
	for _, line := range lines {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a log line is not JSON: %q", line)
			continue
		}
		if rec["level"] == "DEBUG" {
			t.Errorf("log_level = info, yet berth wrote %q", line)
		}
		if rec["provider"] == "local" {
			fromProvider++
		}
	}
	if fromProvider == 0 {
		t.Errorf("no line of the local provider among:\n%s", d.log)
	}
}

// TestTextLogsReachTheLocalProvider: with the default text format, the
// local provider's lines carry berth's key=value format and level, not Go's
// plain log format.
func TestTextLogsReachTheLocalProvider(t *testing.T) {
	d := newDaemon(t, ``)
	d.stop()
	if !regexp.MustCompile(`(?m)^time=\S+ level=INFO msg="local provider ready" provider=local`).MatchString(d.log.String()) {
		t.Fatalf("the local provider did not log through berth's handler:\n%s", d.log)
	}
}

func metricValue(t *testing.T, body, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", series, err)
	}
	return v
}

func TestMetricsShowTheFleetsCostProviderCallsAndBuild(t *testing.T) {
	d := newDaemon(t, ``)
	d.waitJobs(time.Minute, d.submit("--", "sleep 2"))
	scrape := func() string {
		resp, err := http.Get("http://" + d.listen + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	waitFor(t, 30*time.Second, "hot instance-seconds to accrue", func() bool {
		return metricValue(t, scrape(), `berth_instance_seconds_total{phase="hot"}`) >= 2
	})
	body := scrape()
	if n := metricValue(t, body, `berth_provider_call_duration_seconds_count{method="increase"}`); n < 1 {
		t.Errorf("increase calls = %v, want at least the one that made the instance", n)
	}
	if n := metricValue(t, body, `berth_provider_call_duration_seconds_count{method="update"}`); n < 1 {
		t.Errorf("update calls = %v, want the listings", n)
	}
	if !strings.Contains(body, `berth_build_info{commit="`) {
		t.Errorf("no berth_build_info")
	}
}

func TestVersionSaysCommitAndCommitDate(t *testing.T) {
	out, err := exec.Command(berthBin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^berth \S+ \(commit \S+, commit date \S+, go1\.\S+\)\n$`).Match(out) {
		t.Fatalf("berth version printed %q", out)
	}
}
