package main

import (
	"context"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// TestHundredJobsShareOneInstance runs 100 jobs at once on one instance
// with capacity_per_instance = 100. Each job's session needs namespaces of
// its own inside the sandbox; with a fixed per-sandbox quota of 64 the
// jobs past it failed with "fork/exec /bin/sh: no space left on device".
func TestHundredJobsShareOneInstance(t *testing.T) {
	d := newDaemon(t, `
[autoscaler]
capacity_per_instance = 100
max_instances = 1
[[autoscaler.policy]]
idle_count = 0
`)
	c := d.client()
	var ids []string
	for range 100 {
		j, err := c.Submit(context.Background(), api.JobRequest{Script: "sleep 8; echo done"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	for _, j := range d.waitJobs(3*time.Minute, ids...) {
		if j.State != api.JobSuccess {
			t.Errorf("job %s: %s (%s)", j.ID, j.State, j.Reason)
		}
	}
	if n := len(d.instances()); n != 1 {
		t.Errorf("%d instances, want the one instance all jobs shared", n)
	}
}
