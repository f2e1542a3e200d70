package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/gitlabfake"
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

// A GitLab source's settings change by SIGHUP while one of its jobs runs:
// request_concurrency 1 → 3 shows in GitLab's polls in flight, builds_dir
// in the next job's directory, and the running job keeps its directory,
// runs on and ends only when GitLab cancels it. A changed token is named
// as needing a restart, not applied.
func TestReloadGitLabSourceBySighupWhileAJobRuns(t *testing.T) {
	// Polls are held long, as GitLab holds them, so that the polls in
	// flight are the loops berth runs.
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-reload", TraceUpdateInterval: 1, LongPoll: time.Minute})
	t.Cleanup(fake.Close)
	source := fmt.Sprintf(`[[source]]
kind = "gitlab"
url = %q
token = "glrt-reload"
check_interval = "100ms"
request_concurrency = 1
builds_dir = "/tmp/builds-before"
`, fake.URL())
	d := newDaemon(t, "shutdown_timeout = \"1s\"\n[autoscaler]\nmax_instances = 1\ncapacity_per_instance = 4\n[[autoscaler.policy]]\nidle_count = 1\n"+source)
	noGit := []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}}
	running := fake.Job(fake.AddJob(gitlabfake.JobSpec{Script: []string{"echo started in $PWD", "sleep 303"}, Variables: noGit}))
	waitFor(t, 2*time.Minute, "the first job to run", func() bool {
		return running.State() == gitlabfake.StateRunning && strings.Contains(running.Trace(), "started in /tmp/builds-before")
	})
	if n := fake.MaxConcurrentPolls(); n != 1 {
		t.Fatalf("%d polls in flight at once with request_concurrency = 1", n)
	}

	file := filepath.Join(d.dir, "berth.toml")
	old, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(old), "request_concurrency = 1", "request_concurrency = 3", 1)
	changed = strings.Replace(changed, "/tmp/builds-before", "/tmp/builds-after", 1)
	if err := os.WriteFile(file, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, time.Minute, "the reload to be logged", func() bool { return strings.Contains(d.log.String(), "config reloaded") })
	line := lineWith(d.log.String(), "config reloaded")
	for _, want := range []string{"source[0].request_concurrency", "source[0].builds_dir", "needs_restart=[]"} {
		if !strings.Contains(line, want) {
			t.Errorf("reload line lacks %q: %s", want, line)
		}
	}
	waitFor(t, time.Minute, "three polls in flight (request_concurrency 3 applied)", func() bool { return fake.PollsInFlight() == 3 })

	next := fake.Job(fake.AddJob(gitlabfake.JobSpec{Script: []string{"echo ran in $PWD"}, Variables: noGit}))
	waitFor(t, 2*time.Minute, "the second job to end", func() bool { return next.State() != gitlabfake.StatePending && next.State() != gitlabfake.StateRunning })
	if next.State() != gitlabfake.StateSuccess || !strings.Contains(next.Trace(), "ran in /tmp/builds-after") {
		t.Errorf("the job taken after the reload ended %s; want success in /tmp/builds-after:\n%s", next.State(), next.Trace())
	}

	// A new token is another runner: named, not applied.
	if err := os.WriteFile(file, []byte(strings.Replace(changed, `token = "glrt-reload"`, `token = "glrt-other"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := d.berth("config", "reload")
	if code != 0 || !strings.Contains(out, "source[0].token") {
		t.Errorf("berth config reload with a new token: exit %d\n%s%s", code, out, errOut)
	}

	if running.State() != gitlabfake.StateRunning || strings.Contains(running.Trace(), "builds-after") {
		t.Fatalf("the job running through the reload is %s:\n%s", running.State(), running.Trace())
	}
	running.Canceling()
	waitFor(t, time.Minute, "the first job to be canceled", func() bool { return running.State() == gitlabfake.StateCanceled })
}

func lineWith(log, s string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
