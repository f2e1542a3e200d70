package main

import (
	"strings"
	"testing"
)

// --frontier prints berth at each target_wait, the baselines at their best
// setting in hindsight (berth's own core with a fixed suspended pool among
// them) and the verdict; a target of 0 is refused.
func TestBenchFrontier(t *testing.T) {
	trace := "../../bench/testdata/google2011_2011-05-16T21Z_4h_jobs.csv"
	args := []string{"--trace", trace, "--hours", "0.5", "--max-duration", "20m", "--boot-time", "60s",
		"--resume-time", "10s", "--max-instances", "200", "--frontier"}
	out, stderr, err := runCLI(t, newBenchCmd(), "", args...)
	if err != nil {
		t.Fatal(err, stderr)
	}
	for _, want := range []string{"| berth, target_wait | 5s |", "| berth, target_wait | 1m0s |",
		"| berth, fixed suspended pool |", "| warm-pool |", "| naive-idle |", "berth at target_wait 15s: p95",
		"clairvoyant (every job known in advance, no wait): utilization 0."} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	_, _, err = runCLI(t, newBenchCmd(), "", append(args, "--frontier-target", "0s")...)
	if err == nil || !strings.Contains(err.Error(), "--frontier-target") {
		t.Fatalf("--frontier-target 0s: %v", err)
	}
}
