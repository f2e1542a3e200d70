package main

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Google's part files come gzipped; the converter reads them as they are,
// keeps the window asked for, writes the CSV and it replays.
func TestBenchConvertGoogle2011(t *testing.T) {
	sample, err := os.ReadFile("../../bench/testdata/google2011_job_events_sample.csv")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	part := filepath.Join(dir, "part-00000-of-00500.csv.gz")
	f, err := os.Create(part)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	zw.Write(sample)
	zw.Close()
	f.Close()

	out := filepath.Join(dir, "trace.csv")
	// 2011-05-01 23:00 UTC is the trace's start, timestamp 600 s.
	stdout, stderr, err := runCLI(t, newBenchCmd(), "", "convert", "google2011", "--start", "2011-05-01T23:00:00Z", "--hours", "1", part, "-o", out)
	if err != nil {
		t.Fatal(err, stderr)
	}
	if stdout != "" || !strings.Contains(stderr, "5 arrive in the window, kept 4 (dropped: 0 never ended in the trace, 1 ran under 1s") || !strings.Contains(stderr, "wrote 4 jobs to "+out) {
		t.Fatalf("stdout %q, stderr %q", stdout, stderr)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "arrival_unix_s,duration_s\n1304290804,70\n1304290812,49\n1304290907,1738\n1304290970,151\n"
	if string(got) != want {
		t.Fatalf("trace:\n%s\nwant:\n%s", got, want)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o644 {
		t.Fatalf("trace mode %v", st.Mode())
	}

	stdout, stderr, err = runCLI(t, newBenchCmd(), "", "--trace", out, "--max-instances", "5", "--json")
	if err != nil {
		t.Fatal(err, stderr)
	}
	var res struct{ Jobs, Completed int }
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.Jobs != 4 || res.Completed != 4 {
		t.Fatalf("replay of the converted trace: %+v, %v\n%s", res, err, stdout)
	}
}

// task_events read from stdin, one trace job per task.
func TestBenchConvertGoogle2011TasksFromStdin(t *testing.T) {
	sample, err := os.ReadFile("../../bench/testdata/google2011_task_events_sample.csv")
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, err := runCLI(t, newBenchCmd(), string(sample), "convert", "google2011", "--per-task", "-")
	if err != nil {
		t.Fatal(err, stderr)
	}
	want := "arrival_unix_s,duration_s\n1304290972,150\n1304290972,150\n1304291121,403\n1304291121,403\n"
	if stdout != want || !strings.Contains(stderr, "12 events of 4 tasks") || !strings.Contains(stderr, "ended by KILL 4") {
		t.Fatalf("stdout %q, stderr %q", stdout, stderr)
	}
}

func TestBenchConvertGitLab(t *testing.T) {
	stdout, stderr, err := runCLI(t, newBenchCmd(), "", "convert", "gitlab", "../../bench/testdata/gitlab_jobs_sample.json")
	if err != nil {
		t.Fatal(err, stderr)
	}
	if stdout != "arrival_unix_s,duration_s\n1772441910,60\n1772445600,235\n1772445838,346\n" {
		t.Fatalf("stdout %q", stdout)
	}
	if !strings.Contains(stderr, "read 7 jobs, kept 3 (dropped: 3 never ran or still run, 1 listed twice); 1 arrive at created_at") {
		t.Fatalf("stderr %q", stderr)
	}
}

// Bad input says what is wrong and leaves no file behind.
func TestBenchConvertErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "usage.csv")
	os.WriteFile(bad, []byte("0,1,2,3,4,5\n"), 0o644)
	errAnswer := filepath.Join(dir, "jobs.json")
	os.WriteFile(errAnswer, []byte(`{"message":"401 Unauthorized"}`), 0o644)
	out := filepath.Join(dir, "out.csv")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"convert", "google2011"}, "requires at least 1 arg"},
		{[]string{"convert", "google2011", "--start", "May 16", bad}, "want an RFC 3339 time"},
		{[]string{"convert", "google2011", "--hours", "2", bad}, "--hours needs --start"},
		{[]string{"convert", "google2011", bad, "-o", out}, "usage.csv:1: 6 columns; want 8 (job_events) or 13 (task_events)"},
		{[]string{"convert", "google2011", "--start", "2012-01-01T00:00:00Z", "../../bench/testdata/google2011_job_events_sample.csv", "-o", out}, "no job to write"},
		{[]string{"convert", "google2011", filepath.Join(dir, "missing.csv.gz")}, "no such file"},
		{[]string{"convert", "gitlab", errAnswer, "-o", out}, "error answer from GitLab, not jobs: \"401 Unauthorized\""},
		{[]string{"--max-instances", "3"}, "docs/bench.md"},
	} {
		_, _, err := runCLI(t, newBenchCmd(), "", c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("berth bench %s: err = %v, want it to say %q", strings.Join(c.args, " "), err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "../shared") {
			t.Errorf("berth bench %s: error points outside the repository: %v", strings.Join(c.args, " "), err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("a failed conversion left files behind: %v", entries)
	}
}
