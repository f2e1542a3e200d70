package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/bench"
)

// bench generate writes a trace that bench replays; jitter needs a trace.
func TestBenchGenerate(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "poisson.csv")
	if _, stderr, err := runCLI(t, newBenchCmd(), "", "generate", "poisson", out, "--seed", "3"); err != nil {
		t.Fatal(err, stderr)
	}
	jobs, err := bench.LoadTrace(out)
	if err != nil || len(jobs) < 50000 {
		t.Fatalf("%d jobs, %v", len(jobs), err)
	}
	jit := filepath.Join(dir, "jit.csv")
	if _, stderr, err := runCLI(t, newBenchCmd(), "", "generate", "jitter", jit, "--trace", out, "--max-shift", "3s"); err != nil {
		t.Fatal(err, stderr)
	}
	moved, err := bench.LoadTrace(jit)
	if err != nil || len(moved) != len(jobs) {
		t.Fatalf("jitter: %d jobs of %d, %v", len(moved), len(jobs), err)
	}
	_, _, err = runCLI(t, newBenchCmd(), "", "generate", "jitter", jit)
	if err == nil || !strings.Contains(err.Error(), "--trace") {
		t.Fatalf("jitter without --trace: %v", err)
	}
	_, _, err = runCLI(t, newBenchCmd(), "", "generate", "hourly", filepath.Join(dir, "x.csv"))
	if err == nil || !strings.Contains(err.Error(), "office") {
		t.Fatalf("unknown shape: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.csv")); err == nil {
		t.Fatal("a failed generate left a file")
	}
}

// --suspended-cost 0 is refused rather than silently read as 0.1, and the
// baselines' flags belong to their policies.
func TestBenchRejectsMeaninglessFlags(t *testing.T) {
	trace := "../../bench/testdata/google2011_2011-05-16T21Z_4h_jobs.csv"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--suspended-cost", "0"}, "--suspended-cost 0"},
		{[]string{"--pool-size", "5"}, "--pool-size is for --policy warm-pool"},
		{[]string{"--policy", "warm-pool"}, "--pool-size N"},
		{[]string{"--schedule", "* * * * *=3"}, "--schedule is for --policy scheduled"},
		{[]string{"--policy", "scheduled", "--schedule", "* 9-17 * * 1-5"}, `want "CRON=N"`},
		{[]string{"--policy", "scheduled"}, "--schedule"},
		{[]string{"--no-history", "--warmup", "1h"}, "give one of them"},
	} {
		_, _, err := runCLI(t, newBenchCmd(), "", append([]string{"--trace", trace, "--hours", "0.1"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want it to say %q", c.args, err, c.want)
		}
	}
	stdout, stderr, err := runCLI(t, newBenchCmd(), "", "--trace", trace, "--hours", "0.5", "--policy", "warm-pool", "--pool-size", "5", "--suspend-time", "30s", "--warmup", "10m")
	if err != nil || !strings.Contains(stdout, "pool size") || !strings.Contains(stdout, "jobs measured (after warmup)") {
		t.Fatalf("warm-pool run: %v %s\n%s", err, stderr, stdout)
	}
}
