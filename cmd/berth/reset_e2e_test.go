package main

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// leftovers is a job that leaves a background process and files behind and
// then runs until it is killed.
const leftovers = `setsid sh -c 'while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &
echo left > /tmp/left; echo left > /dev/shm/left; echo left > $HOME/left
echo started; sleep 300`

// inspect prints what the next job finds of leftovers.
const inspect = `echo procs=$(for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '[s]leep 1')
echo files=$(ls /tmp/left /dev/shm/left $HOME/left 2>/dev/null | wc -l)`

// TestNextJobAfterKill9SeesNothingOfTheDeadJob kills berth while a job
// that left processes and files behind runs; after the restart the next job
// on the same instance must find none of them.
func TestNextJobAfterKill9SeesNothingOfTheDeadJob(t *testing.T) {
	d := newDaemon(t, `
[autoscaler]
max_instances = 1
`)
	first := d.submit("--", leftovers)
	var inst string
	waitFor(t, time.Minute, "the first job to start", func() bool {
		j := d.job(first)
		inst = j.Instance
		return j.State == api.JobRunning && inst != ""
	})
	waitFor(t, 30*time.Second, "the first job's output", func() bool {
		out, _, _ := d.berth("logs", first)
		return strings.Contains(out, "started")
	})
	d.kill9()
	d.start()
	out, errOut, code := d.berth("submit", "--wait", "--", inspect)
	if code != 0 {
		t.Fatalf("second job: exit %d, %s %s", code, out, errOut)
	}
	if !strings.Contains(out, "procs=0") || !strings.Contains(out, "files=0") {
		t.Errorf("the job after the restart saw what the dead job on %s left:\n%s", inst, out)
	}
	if ins := d.instances(); len(ins) != 1 || ins[0].ID != inst {
		t.Errorf("instances after restart: %+v, want only %s", ins, inst)
	}
}

// TestEnvironmentKeepsItsFilesWhenItsResumeJobDiesWithBerth kills berth
// while a job runs on a parked environment it resumed. The environment
// outlives that job (it is parked again as the job left it), so the reset
// that wipes the instances of dead jobs must leave it alone: the next
// resume still finds the files the parking job wrote.
func TestEnvironmentKeepsItsFilesWhenItsResumeJobDiesWithBerth(t *testing.T) {
	d := newDaemon(t, "")
	key, host := parkMarker(t, d)
	running := d.submit("--resume", key, "--", "echo started; sleep 300")
	waitFor(t, time.Minute, "the resume job's output", func() bool {
		out, _, _ := d.berth("logs", running)
		return strings.Contains(out, "started")
	})
	d.kill9()
	d.start()
	resumeMarker(t, d, key, host)
}
