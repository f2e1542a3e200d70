package main

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// Issue 43, item 3, on the real binary: max_instances = 1, idle_count =
// 0, a running job, a queued job canceled while it waited for the
// instance, then `berth instances delete --all --force`. When the drained
// instance went, berth booted a new one nobody asked for ("scale up
// in_use=1 have=0 want=1", 0 uses): the canceled job still counted as
// queued demand, since the count was only sent again when a job was
// taken or refused a slot.
func TestOperatorDeleteBootsNoInstanceForACanceledJob(t *testing.T) {
	d := newDaemon(t, "[autoscaler]\nmax_instances = 1\n[[autoscaler.policy]]\nidle_count = 0\n")
	running := d.submit("--", "sleep 600")
	waitFor(t, time.Minute, "the first job to run", func() bool { return d.job(running).State == api.JobRunning })
	queued := d.submit("--", "echo never runs")
	waitFor(t, time.Minute, "the second job to wait for the instance", func() bool { return d.job(queued).WaitingFor != "" })
	if _, errOut, code := d.berth("jobs", "--cancel", queued); code != 0 {
		t.Fatalf("cancel the queued job: %s", errOut)
	}
	if out, errOut, code := d.berth("instances", "delete", "--all", "--force"); code != 0 || !strings.Contains(out, "draining") {
		t.Fatalf("instances delete --all --force: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := d.berth("jobs", "--cancel", running); code != 0 {
		t.Fatalf("cancel the running job: %s", errOut)
	}
	drained := d.job(running).Instance
	d.waitJobs(time.Minute, running)
	waitFor(t, time.Minute, "the drained instance to be gone", func() bool {
		for _, in := range d.instances() {
			if in.ID == drained {
				return false
			}
		}
		return true
	})
	if ins := d.instances(); len(ins) > 0 {
		t.Errorf("berth booted %s for nobody after the drained instance went", ins[0].ID)
	}
	// The core decides on the instance's removal and any scale-up in one
	// step, logged before the instance leaves the listing berth serves.
	if n := strings.Count(d.log.String(), `msg="scale up"`); n != 1 {
		t.Errorf("%d scale-ups logged, want only the first job's:\n%s", n, lastLines(d.log.String(), 8))
	}
}
