package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// With log_format = "json" every line berth writes is a JSON object: the
// lines of a job's life, the stop, and the error berth exits with; and
// durations are seconds, not nanoseconds.
func TestJSONLogIsEveryLine(t *testing.T) {
	d := newDaemon(t, `log_format = "json"`)
	if out, errOut, code := d.berth("submit", "--wait", "--", "echo hi"); code != 0 || !strings.Contains(out, "hi") {
		t.Fatalf("submit --wait: exit %d\n%s%s", code, out, errOut)
	}

	// A second berth on the same config cannot start (address or state in
	// use): its last words are JSON too.
	second := exec.Command(berthBin, "run", "--config", filepath.Join(d.dir, "berth.toml"))
	out, err := second.CombinedOutput()
	if err == nil {
		t.Fatalf("a second berth on the same address started:\n%s", out)
	}
	lines := jsonLines(t, "the second berth", string(out))
	last := lines[len(lines)-1]
	if last["level"] != "ERROR" || last["err"] == nil {
		t.Errorf("the second berth's last line is %v, want the error it exits with", last)
	}

	d.stop()
	var durations int
	for _, rec := range jsonLines(t, "berth", d.log.String()) {
		if rec["msg"] == "stopping: taking no new jobs and starting no instances; running jobs may finish, send the signal again to cancel them now" {
			if rec["grace"] != float64(300) {
				t.Errorf("grace = %v (%T), want 300 (seconds)", rec["grace"], rec["grace"])
			}
			durations++
		}
	}
	if durations == 0 {
		t.Errorf("no stop line with its grace period in the log:\n%s", d.log)
	}
}

// jsonLines parses every line of a log as a JSON object, failing on any
// that is not one.
func jsonLines(t *testing.T, who, log string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("%s wrote a line that is not JSON: %q", who, line)
			continue
		}
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		t.Fatalf("%s wrote no JSON line:\n%s", who, log)
	}
	return recs
}
