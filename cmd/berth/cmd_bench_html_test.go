package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchWritesHTMLAndSVG replays an hour of the shipped trace slice and
// writes both pictures.
func TestBenchWritesHTMLAndSVG(t *testing.T) {
	dir := t.TempDir()
	html, svg := filepath.Join(dir, "r.html"), filepath.Join(dir, "r.svg")
	_, stderr, err := runCLI(t, newBenchCmd(), "", "--trace", "../../bench/testdata/google2011_2011-05-16T21Z_4h_jobs.csv",
		"--hours", "1", "--max-duration", "30m", "--max-instances", "50", "--html", html, "--svg", svg)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"google2011_2011-05-16T21Z_4h_jobs.csv", "max_instances 50", "uPlot", "wait p50"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("--html report lacks %q", want)
		}
	}
	if pic, err := os.ReadFile(svg); err != nil || !strings.Contains(string(pic), "max_instances 50") {
		t.Errorf("--svg: %v", err)
	}
	_, _, err = runCLI(t, newBenchCmd(), "", "--trace", "../../bench/testdata/google2011_2011-05-16T21Z_4h_jobs.csv",
		"--hours", "1", "--html", filepath.Join(dir, "no", "such", "dir.html"))
	if err == nil || !strings.Contains(err.Error(), "--html") {
		t.Errorf("--html into a missing directory: %v; want an error naming --html", err)
	}
}
