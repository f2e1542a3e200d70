package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/sandboxtest"
	"github.com/berth-ci/berth/jobsource/queue"
)

func TestQuickstartGreetsFromASandbox(t *testing.T) {
	d := newDaemon(t, "")
	out, errOut, code := d.berth("submit", "--wait", "--", "echo hello from $(hostname)")
	if code != 0 {
		t.Fatalf("submit --wait exited %d: %s", code, errOut)
	}
	host, _ := os.Hostname()
	if !strings.HasPrefix(out, "hello from ") || strings.TrimSpace(out) == "hello from "+host {
		t.Fatalf("output %q: want a greeting from a sandbox whose hostname is not %q", out, host)
	}
	sandbox := strings.TrimSpace(strings.TrimPrefix(out, "hello from "))
	table, _, _ := d.berth("instances")
	if !strings.Contains(table, sandbox) {
		t.Errorf("berth instances does not show %s:\n%s", sandbox, table)
	}
}

func TestQuickstartRunsUnprivileged(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv (util-linux) is needed to run berth unprivileged; .ci/run installs it")
	}
	if os.Getuid() != 0 {
		t.Log("already unprivileged; running berth as is")
		setpriv = ""
	}
	var prefix []string
	if setpriv != "" {
		prefix = []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}
	}
	d := newDaemon(t, "", prefix...)
	out, errOut, code := d.berth("submit", "--wait", "--", "echo hello from $(hostname); id -u")
	if code != 0 {
		t.Fatalf("submit --wait exited %d: %s\nberth log:\n%s", code, errOut, d.log)
	}
	host, _ := os.Hostname()
	if !strings.HasPrefix(out, "hello from local-") || strings.Contains(out, "hello from "+host+"\n") {
		t.Fatalf("output %q: want a greeting from a sandbox", out)
	}
}

func TestTwentyJobsOnFourInstancesOfTwoSlots(t *testing.T) {
	d := newDaemon(t, `
[autoscaler]
max_instances = 4
capacity_per_instance = 2
[[autoscaler.policy]]
idle_count = 0
preemptive_mode = false
`)
	var ids []string
	for i := range 20 {
		ids = append(ids, d.submit("--", fmt.Sprintf("sleep 0.5; echo job %d on $(hostname)", i)))
	}
	peak := 0
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // watch the fleet while the jobs run
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			n := len(sandboxDirs(t, d))
			mu.Lock()
			peak = max(peak, n)
			mu.Unlock()
		}
	}()
	jobs := d.waitJobs(3*time.Minute, ids...)
	close(stop)
	wg.Wait()
	for _, j := range jobs {
		if j.State != api.JobSuccess {
			t.Errorf("job %s: %s (%s)", j.ID, j.State, j.Reason)
		}
	}
	if peak > 4 {
		t.Errorf("saw %d sandboxes at once, max_instances is 4", peak)
	}
	if peak == 0 {
		t.Error("never saw a sandbox: the watcher is broken")
	}
	t.Logf("20 jobs done; peak sandboxes %d", peak)
}

func TestJobResults(t *testing.T) {
	d := newDaemon(t, "")
	// exit 3 fails the job, and submit --wait exits 3.
	if _, _, code := d.berth("submit", "--wait", "--", "echo failing; exit 3"); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}

	// A job over its timeout fails with a timeout reason.
	id := d.submit("--timeout", "2s", "--", "sleep 60")
	if j := d.waitJobs(time.Minute, id)[0]; j.State != api.JobFailed || !strings.Contains(j.Reason, "timeout") {
		t.Errorf("job %+v: want failed with a timeout reason", j)
	}

	// A job whose instance is killed is a system failure naming the instance.
	{
		id := d.submit("--", "echo started; sleep 120")
		var inst string
		waitFor(t, time.Minute, "the job to start", func() bool {
			j := d.job(id)
			inst = j.Instance
			return j.State == api.JobRunning && inst != ""
		})
		time.Sleep(500 * time.Millisecond) // let the script reach its sleep
		killSandbox(t, d, inst)
		j := d.waitJobs(time.Minute, id)[0]
		if j.State != api.JobFailed || !strings.Contains(j.Reason, inst) || j.Failure != "system_failure" {
			t.Fatalf("job %+v: want a system failure naming %s", j, inst)
		}
	}
}

// killSandbox kills an instance's processes from outside, as a crashed VM.
func killSandbox(t *testing.T, d *daemon, id string) {
	t.Helper()
	if sandboxtest.Kill(filepath.Join(d.dir, "state"), id) == 0 {
		t.Fatalf("found no process of sandbox %s to kill", id)
	}
}

func TestKill9WhileFiveJobsRunThenRestart(t *testing.T) {
	d := newDaemon(t, `
[autoscaler]
max_instances = 5
[[autoscaler.policy]]
idle_count = 0
preemptive_mode = false
`)
	var running []string
	for range 5 {
		running = append(running, d.submit("--", "echo started; sleep 300"))
	}
	waitFor(t, 2*time.Minute, "5 jobs to run", func() bool {
		for _, id := range running {
			if d.job(id).State != api.JobRunning {
				return false
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond)
	d.kill9()
	before := sandboxDirs(t, d)

	d.start()
	queued := d.submit("--", "echo after restart")
	for _, id := range running {
		if j := d.job(id); j.State != api.JobFailed || j.Reason != queue.RestartReason {
			t.Errorf("job %s after restart: %s %q, want failed %q", id, j.State, j.Reason, queue.RestartReason)
		}
	}
	if j := d.waitJobs(2*time.Minute, queued)[0]; j.State != api.JobSuccess {
		t.Errorf("job queued after restart: %s (%s)", j.State, j.Reason)
	}
	known := map[string]bool{}
	for _, in := range d.instances() {
		known[in.ID] = true
	}
	for _, id := range before {
		if !known[id] {
			t.Errorf("sandbox %s from before the crash is not known to berth after restart", id)
		}
	}
	for pid, id := range sandboxProcesses(d) {
		if !known[id] {
			t.Errorf("sandbox process %d of %s is orphaned: berth does not know instance %s", pid, id, id)
		}
	}
	if len(before) != 5 {
		t.Errorf("%d sandboxes before restart, want the 5 that ran jobs", len(before))
	}
}

func TestIdleInstancesAreDeletedAfterIdleTime(t *testing.T) {
	d := newDaemon(t, `
[autoscaler]
capacity_per_instance = 2
max_instances = 4
[[autoscaler.policy]]
idle_count = 3
idle_time = "2s"
`)
	// idle_count is counted in slots: 3 idle slots need 2 instances of 2 slots.
	waitFor(t, time.Minute, "an idle pool of 2 instances", func() bool {
		ins := d.instances()
		idle := 0
		for _, in := range ins {
			idle += in.Slots.Idle
		}
		return len(ins) == 2 && idle == 4
	})
	// A burst makes more instances; after it they go back to the pool size.
	var ids []string
	for range 6 {
		ids = append(ids, d.submit("--", "sleep 1"))
	}
	d.waitJobs(2*time.Minute, ids...)
	waitFor(t, time.Minute, "idle instances beyond the pool to be deleted", func() bool {
		return len(d.instances()) == 2
	})
	resp, err := http.Get("http://" + d.listen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metrics := string(body)
	if !strings.Contains(metrics, `berth_instance_deletions_total{reason="idle_timeout"}`) {
		t.Errorf("metrics do not count idle deletions:\n%s", metrics)
	}
}
