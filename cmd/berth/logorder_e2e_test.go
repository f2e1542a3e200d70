package main

import (
	"strings"
	"testing"
)

// The issue's own case, end to end: `berth submit --wait` and `berth logs`
// print stdout and stderr in the order the job wrote them, and a queued
// job's instance can be deleted with `berth instances delete` once idle.
func TestSubmitWaitAndLogsKeepTheOrderOfStdoutAndStderr(t *testing.T) {
	d := newDaemon(t, "")
	script := "echo one; echo two >&2; echo three; for i in 1 2 3 4 5 6 7 8 9; do echo out$i; echo err$i >&2; done"
	want := "one\ntwo\nthree\n"
	for i := 1; i <= 9; i++ {
		want += "out" + string(rune('0'+i)) + "\nerr" + string(rune('0'+i)) + "\n"
	}
	out, errOut, code := d.berth("submit", "--wait", "--", script)
	if code != 0 || out != want {
		t.Fatalf("submit --wait exited %d, printed:\n%s\nwant:\n%s\n%s", code, out, want, errOut)
	}
	logs, errOut, code := d.berth("logs", "1")
	if code != 0 || logs != want {
		t.Fatalf("berth logs exited %d, printed:\n%s\nwant:\n%s\n%s", code, logs, want, errOut)
	}
	del, errOut, code := d.berth("instances", "delete", "--all")
	if code != 0 || !strings.Contains(del, ": deleting") {
		t.Fatalf("berth instances delete --all exited %d:\n%s\n%s", code, del, errOut)
	}
}
