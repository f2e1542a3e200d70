package main

import (
	"testing"
	"time"
)

// Issue 9, item 3: with delete_instances_on_shutdown = true every graceful
// stop used to leave one sandbox behind, because the core refilled the idle
// pool right after the shutdown deletions.
func TestDeleteInstancesOnShutdownLeavesNothing(t *testing.T) {
	d := newDaemon(t, "[autoscaler]\ndelete_instances_on_shutdown = true\n")
	waitFor(t, 60*time.Second, "the idle instance to be ready", func() bool {
		for _, in := range d.instances() {
			if in.State == "ready" {
				return true
			}
		}
		return false
	})
	if out, errOut, code := d.berth("submit", "--wait", "--", "true"); code != 0 {
		t.Fatalf("job: %s %s", out, errOut)
	}
	d.stop()
	if dirs := sandboxDirs(t, d); len(dirs) != 0 {
		t.Errorf("sandboxes left after a graceful stop with delete_instances_on_shutdown: %v", dirs)
	}
	if procs := sandboxProcesses(d); len(procs) != 0 {
		t.Errorf("sandbox processes left: %v", procs)
	}
}
