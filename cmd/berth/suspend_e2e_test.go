package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

var envKeyLine = regexp.MustCompile(`environment key: (\S+)`)

// parkMarker runs a job that writes a marker file and parks its environment;
// it returns the environment key and the instance the job ran on.
func parkMarker(t *testing.T, d *daemon) (key, host string) {
	t.Helper()
	out, errOut, code := d.berth("submit", "--wait", "--suspend", "--", "echo parked-$(hostname) > /berth/marker; hostname")
	if code != 0 {
		t.Fatalf("submit --suspend exited %d: %s", code, errOut)
	}
	m := envKeyLine.FindStringSubmatch(errOut)
	if m == nil {
		t.Fatalf("submit --suspend printed no environment key on stderr: %q", errOut)
	}
	return m[1], strings.TrimSpace(out)
}

// resumeMarker runs a job on the parked environment and checks it sees the marker.
func resumeMarker(t *testing.T, d *daemon, key, host string) {
	t.Helper()
	out, errOut, code := d.berth("submit", "--wait", "--resume", key, "--", "cat /berth/marker; hostname")
	if code != 0 {
		t.Fatalf("submit --resume exited %d: %s", code, errOut)
	}
	if want := "parked-" + host + "\n" + host + "\n"; out != want {
		t.Fatalf("resumed job printed %q, want %q (same instance, same disk)", out, want)
	}
}

func TestSuspendedEnvironmentSurvivesKill9WhileSuspending(t *testing.T) {
	d := newDaemon(t, "")
	key, host := parkMarker(t, d)
	// The suspend was issued as the job ended: kill berth while it is in flight.
	d.kill9()
	d.start()
	resumeMarker(t, d, key, host)
}

func TestSuspendedEnvironmentSurvivesGracefulRestart(t *testing.T) {
	d := newDaemon(t, "")
	key, host := parkMarker(t, d)
	waitFor(t, 30*time.Second, "the instance to be suspended", func() bool {
		for _, in := range d.instances() {
			if in.ID == host && in.State == "suspended" {
				return true
			}
		}
		return false
	})
	d.stop()
	d.start()
	resumeMarker(t, d, key, host)
}

func TestResumeWithAForeignKeyIsRefused(t *testing.T) {
	d := newDaemon(t, "")
	_, errOut, code := d.berth("submit", "--wait", "--resume", "0123456789abcdef-feedfacefeedface", "--", "true")
	if code == 0 || !strings.Contains(errOut, "another berth state") {
		t.Fatalf("resume with a foreign key: exit %d, stderr %q; want a clear refusal", code, errOut)
	}
	// Refused at submit: no job was queued only to fail later.
	if jobs, err := d.client().Jobs(context.Background()); err != nil || len(jobs) != 0 {
		t.Errorf("jobs after the refused resume: %+v, %v; want none", jobs, err)
	}
}

func TestKill9AtARandomMomentOfFiftyJobs(t *testing.T) {
	d := newDaemon(t, `
[autoscaler]
max_instances = 6
capacity_per_instance = 2
[[autoscaler.policy]]
idle_count = 2
`)
	var ids []string
	for i := range 50 {
		ids = append(ids, d.submit("--", fmt.Sprintf("sleep 0.$((RANDOM %% 5)); echo job %d", i)))
	}
	time.Sleep(time.Duration(rand.IntN(3000)) * time.Millisecond)
	d.kill9()
	d.start()
	jobs := d.waitJobs(3*time.Minute, ids...)
	for _, j := range jobs {
		switch {
		case j.State == api.JobSuccess:
		case j.State == api.JobFailed && j.Reason != "":
		default:
			t.Errorf("job %s ended %s without a reason", j.ID, j.State)
		}
	}
	known := map[string]bool{}
	for _, in := range d.instances() {
		known[in.ID] = true
	}
	for _, id := range sandboxDirs(t, d) {
		if !known[id] {
			t.Errorf("sandbox directory %s is orphaned after the restart", id)
		}
	}
	for pid, id := range sandboxProcesses(d) {
		if !known[id] {
			t.Errorf("sandbox process %d of %s is orphaned after the restart", pid, id)
		}
	}
}
