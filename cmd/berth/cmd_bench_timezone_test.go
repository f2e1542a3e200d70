package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// --timezone names the policy's zone (it reaches the JSON) and a zone that
// does not exist is refused with what to give; every replay carries the
// clairvoyant reference, above the run's own utilization.
func TestBenchTimezoneAndClairvoyant(t *testing.T) {
	trace := "../../bench/testdata/google2011_2011-05-16T21Z_4h_jobs.csv"
	args := []string{"--trace", trace, "--hours", "0.5", "--max-duration", "20m", "--boot-time", "60s",
		"--resume-time", "10s", "--max-instances", "200", "--target-wait", "15s", "--json"}
	out, stderr, err := runCLI(t, newBenchCmd(), "", append(args, "--timezone", "Europe/Berlin")...)
	if err != nil {
		t.Fatal(err, stderr)
	}
	var res struct {
		Timezone    string  `json:"timezone"`
		Utilization float64 `json:"utilization"`
		Clairvoyant float64 `json:"clairvoyant_utilization"`
		Ratio       float64 `json:"clairvoyant_ratio"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err, out)
	}
	if res.Timezone != "Europe/Berlin" || res.Clairvoyant <= res.Utilization || res.Ratio <= 0 || res.Ratio >= 1 {
		t.Errorf("timezone %q, utilization %.3f, clairvoyant %.3f, ratio %.3f; want Europe/Berlin and a reference above the run",
			res.Timezone, res.Utilization, res.Clairvoyant, res.Ratio)
	}
	_, _, err = runCLI(t, newBenchCmd(), "", append(args, "--timezone", "Mars/Olympus")...)
	if err == nil || !strings.Contains(err.Error(), "--timezone") || !strings.Contains(err.Error(), "IANA") {
		t.Fatalf("--timezone Mars/Olympus: %v; want an error naming the flag and what to give", err)
	}
}
