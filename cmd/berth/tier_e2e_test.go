package main

import (
	"strings"
	"testing"
	"time"
)

// The suspended tier on the real daemon and the local provider: in
// preemptive mode with idle_count = 0, a job in the built-in queue starts an
// instance by itself (queued jobs are demand); once idle the instance is
// suspended, not deleted; the next job resumes it instead of booting another.
func TestQueuedJobStartsAnInstanceAndTheTierResumesIt(t *testing.T) {
	d := newDaemon(t, `
[autoscaler]
max_instances = 2
[[autoscaler.policy]]
idle_count = 0
idle_time = "1s"
preemptive_mode = true
suspended_idle_time = "10m"
target_wait = "15s"
`)
	first := d.submit("--", "echo one")
	if j := d.waitJobs(time.Minute, first)[0]; j.State != "success" {
		t.Fatalf("first job: %+v", j)
	}
	var id string
	waitFor(t, time.Minute, "the idle instance to be suspended", func() bool {
		ins := d.instances()
		if len(ins) == 1 && ins[0].State == "suspended" {
			id = ins[0].ID
			return true
		}
		return false
	})
	second := d.submit("--", "echo two")
	j := d.waitJobs(time.Minute, second)[0]
	if j.State != "success" || j.Instance != id {
		t.Fatalf("second job ran on %q (%s), want the resumed %s", j.Instance, j.State, id)
	}
	if ins := d.instances(); len(ins) != 1 {
		t.Fatalf("%d instances after the resume, want the one resumed", len(ins))
	}
	log := d.log.String()
	for _, want := range []string{`msg="scale suspend"`, `msg="scale resume"`, `msg="pools sized for target_wait"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s", want)
		}
	}
}
