package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/bench"
)

// --jobs writes one line per replayed job, and its "measured" lines are the
// jobs the wait statistics counted.
func TestBenchJobsFile(t *testing.T) {
	trace := "../../bench/testdata/google2011_2011-05-16T21Z_4h_jobs.csv"
	out := filepath.Join(t.TempDir(), "jobs.csv")
	stdout, stderr, err := runCLI(t, newBenchCmd(), "", "--trace", trace, "--hours", "0.5", "--max-duration", "10m",
		"--max-instances", "50", "--warmup", "10m", "--target-wait", "15s", "--json", "--jobs", out)
	if err != nil {
		t.Fatal(err, stderr)
	}
	var res bench.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if lines[0] != "job,arrival_unix_s,arrival_utc,wait_s,counted" || len(lines)-1 != res.Jobs {
		t.Fatalf("header %q, %d lines for %d jobs", lines[0], len(lines)-1, res.Jobs)
	}
	measured, warmup := 0, 0
	for _, l := range lines[1:] {
		f := strings.Split(l, ",")
		if len(f) != 5 || f[3] == "" {
			t.Fatalf("line %q: want 5 fields and a wait", l)
		}
		switch f[4] {
		case "measured":
			measured++
		case "warmup":
			warmup++
		default:
			t.Fatalf("line %q: counted %q", l, f[4])
		}
	}
	if measured != res.Measured || warmup == 0 {
		t.Fatalf("%d measured lines, the replay measured %d; %d in the warm-up", measured, res.Measured, warmup)
	}
	if _, err := os.Stat(out + ".tmp"); err == nil {
		t.Fatal("the temporary file was left")
	}
}
