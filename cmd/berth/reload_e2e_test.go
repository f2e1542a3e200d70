package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// A policy change reaches the running berth by SIGHUP while a job runs:
// the new idle_count and max_instances boot an idle instance beside the
// busy one, the job runs on, on its instance, untouched, and a key that
// needs a restart is named, not applied. `berth config reload` does the
// same through the API.
func TestReloadBySighupWhileAJobRuns(t *testing.T) {
	d := newDaemon(t, "[autoscaler]\nmax_instances = 1\n[[autoscaler.policy]]\nidle_count = 1\n")
	c := d.client()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	job, err := c.Submit(ctx, api.JobRequest{Script: "echo started; while :; do sleep 1; done"})
	if err != nil {
		t.Fatal(err)
	}
	var busy string
	waitFor(t, time.Minute, "the job to run", func() bool {
		j, err := c.Job(ctx, job.ID)
		busy = j.Instance
		return err == nil && j.State == api.JobRunning && busy != ""
	})

	// Two instances, one idle slot, and a listen address that needs a restart.
	file := filepath.Join(d.dir, "berth.toml")
	old, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(old), "max_instances = 1", "max_instances = 2", 1)
	changed = strings.Replace(changed, "idle_count = 1", "idle_count = 1\nidle_time = \"30m\"", 1)
	changed = strings.Replace(changed, "[autoscaler]", "log_level = \"debug\"\njob_timeout = \"2h\"\n[autoscaler]", 1)
	if err := os.WriteFile(file, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, time.Minute, "the reload to be logged", func() bool { return strings.Contains(d.log.String(), "config reloaded") })
	line := lineWith(d.log.String(), "config reloaded")
	for _, want := range []string{"autoscaler.policy", "autoscaler.max_instances", "log_level", "needs_restart=[job_timeout]"} {
		if !strings.Contains(line, want) {
			t.Errorf("reload line lacks %q: %s", want, line)
		}
	}
	waitFor(t, time.Minute, "an idle instance beside the busy one (max_instances 2 applied)", func() bool {
		list, err := c.Instances(ctx)
		return err == nil && len(list) == 2
	})
	j, err := c.Job(ctx, job.ID)
	if err != nil || j.State != api.JobRunning || j.Instance != busy {
		t.Fatalf("the job after the reload: %+v %v; want it running on %s", j, err, busy)
	}

	out, _, code := d.berth("config", "reload")
	if code != 0 || !strings.Contains(out, "nothing that can change live has changed") || !strings.Contains(out, "job_timeout") {
		t.Errorf("berth config reload with nothing new: exit %d\n%s", code, out)
	}
	if err := os.WriteFile(file, []byte(changed+"[[autoscaler.policy]]\nperiods = [\"61 * * * *\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := d.berth("config", "reload")
	if code == 0 || !strings.Contains(errOut, "was not applied") || !strings.Contains(errOut, "invalid cron") {
		t.Errorf("berth config reload of a broken file: exit %d\n%s", code, errOut)
	}
	if _, err := c.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the job to end", func() bool {
		j, err = c.Job(ctx, job.ID)
		return err == nil && j.State.Done()
	})
	var log strings.Builder
	if err := c.Log(ctx, job.ID, false, &log); err != nil || j.State != api.JobCanceled || !strings.Contains(log.String(), "started") {
		t.Errorf("the job ended %s (%v), log %q; want canceled by the test, never by the reload", j.State, err, log.String())
	}
}

func lineWith(log, s string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
