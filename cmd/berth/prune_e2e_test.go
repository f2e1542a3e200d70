package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `berth jobs prune` deletes finished jobs and their logs through the
// running daemon (issue 19: history and logs grew for ever).
func TestJobsPruneDeletesFinishedJobs(t *testing.T) {
	d := newDaemon(t, "")
	out, errOut, code := d.berth("submit", "--wait", "--", "echo pruned")
	if code != 0 {
		t.Fatalf("submit: %d %s %s", code, out, errOut)
	}
	jobs, _, _ := d.berth("jobs")
	if !strings.Contains(jobs, "success") {
		t.Fatalf("berth jobs before pruning:\n%s", jobs)
	}
	out, errOut, code = d.berth("jobs", "prune", "--older-than", "1ns")
	if code != 0 || !strings.Contains(out, "deleted 1 finished job(s)") {
		t.Fatalf("berth jobs prune: exit %d\n%s%s", code, out, errOut)
	}
	if jobs, _, _ := d.berth("jobs"); strings.Contains(jobs, "success") {
		t.Errorf("berth jobs after pruning still lists the job:\n%s", jobs)
	}
	logs, _ := filepath.Glob(filepath.Join(d.dir, "state", "queue", "logs", "*.log"))
	for _, l := range logs {
		if b, _ := os.ReadFile(l); strings.Contains(string(b), "pruned") {
			t.Errorf("the pruned job's log %s is still there", l)
		}
	}
}
