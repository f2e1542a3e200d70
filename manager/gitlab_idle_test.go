package manager

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/gitlabfake"
)

// An idle GitLab costs nothing (issue 17): long-polls in flight hold poll
// bookings, which are no demand. These tests run berth on real sandboxes
// against the fake GitLab with request_concurrency = 4.

// idleGitLab runs one job (so that an instance exists), then lets GitLab sit
// idle, and returns the manager and the fake.
func idleGitLab(t *testing.T, policy string) (*Manager, *gitlabfake.Fake) {
	t.Helper()
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1, LongPoll: 500 * time.Millisecond})
	t.Cleanup(fake.Close)
	fake.AddJob(gitlabfake.JobSpec{Script: []string{"echo one job"}, Variables: []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}}})
	m := startManager(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
request_concurrency = 4
check_interval = "100ms"
[autoscaler]
max_instances = 5
[[autoscaler.policy]]
idle_time = "2s"
%s
`, fake.URL(), policy))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := fake.WaitAllDone(ctx); err != nil {
		t.Fatalf("the job did not finish: %v", err)
	}
	if j := fake.Jobs()[0]; j.ReportedState() != "success" {
		t.Fatalf("job %s:\n%s", j.ReportedState(), j.Trace())
	}
	return m, fake
}

// instances counts every instance berth has or asked for.
func instances(m *Manager) int {
	c := m.fleet.Counts()
	n := c.Pending
	for _, k := range c.InstancesByPhase {
		n += k
	}
	return n
}

// settle waits until berth holds want instances, then checks that it keeps
// holding exactly want while polls go on (20 polls, several long-poll rounds).
func settle(t *testing.T, m *Manager, fake *gitlabfake.Fake, want int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for instances(m) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d instances a minute after the last job, want %d (phases %v, polls in flight %d)",
				instances(m), want, m.fleet.Counts().InstancesByPhase, fake.PollsInFlight())
		}
		time.Sleep(100 * time.Millisecond)
	}
	start := fake.RequestCount()
	for fake.RequestCount() < start+20 {
		if n := instances(m); n != want {
			t.Fatalf("%d instances while GitLab is idle, want %d (phases %v)", n, want, m.fleet.Counts().InstancesByPhase)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := instances(m); n != want {
		t.Fatalf("%d instances while GitLab is idle, want %d", n, want)
	}
	if fake.MaxConcurrentPolls() < 1 {
		t.Fatal("no poll was ever in flight")
	}
}

func TestGitLabIdleOnDemandScalesToZero(t *testing.T) {
	m, fake := idleGitLab(t, "idle_count = 0\npreemptive_mode = false")
	settle(t, m, fake, 0)
	// The polls went on all along: four at once, with no instance.
	if p := fake.MaxConcurrentPolls(); p != 4 {
		t.Errorf("max %d polls at once, want request_concurrency = 4", p)
	}
	// Between two long-polls a loop holds none for check_interval: look
	// a few times rather than once.
	held := false
	for i := 0; i < 100 && !held; i++ {
		held = m.fleet.Counts().Polls > 0
		time.Sleep(20 * time.Millisecond)
	}
	if !held {
		t.Errorf("no poll booking held while idle: %+v", m.fleet.Counts())
	}
}

func TestGitLabIdlePreemptiveKeepsIdleCount(t *testing.T) {
	m, fake := idleGitLab(t, "idle_count = 1")
	settle(t, m, fake, 1)
	// One idle slot: one poll at a time while idle, never one per job loop.
	if c := m.fleet.Counts(); c.Polls > 1 {
		t.Errorf("%d poll bookings on one idle slot", c.Polls)
	}
}

// The job list shows GitLab jobs beside the queue's (issue 17): source
// "gitlab", GitLab's id as external_id, state, instance and timings; a
// submitter, who owns no GitLab job, does not see them.
func TestGitLabJobsInTheJobList(t *testing.T) {
	m, fake := idleGitLab(t, "idle_count = 0\npreemptive_mode = false")
	gl := fake.Jobs()[0]
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	tok, err := api.ReadTokenFile(api.TokenPath(m.cfg.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	c := api.NewClient(srv.URL)
	c.Token = tok
	ctx := context.Background()
	if _, err := c.Submit(ctx, api.JobRequest{Script: "true"}); err != nil {
		t.Fatal(err)
	}
	// The queue job stays queued: this berth takes jobs from GitLab only.
	jobs, err := c.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Fatalf("%d jobs listed, want the GitLab job and the queue job: %+v", len(jobs), jobs)
	}
	g, q := jobs[0], jobs[1] // oldest first
	want := strconv.FormatInt(gl.ID(), 10)
	if g.Source != "gitlab" || g.ExternalID != want || g.ID != "gitlab-"+want || g.State != api.JobSuccess ||
		g.Instance == "" || g.StartedAt == nil || g.FinishedAt == nil || g.ExitCode == nil || *g.ExitCode != 0 {
		t.Errorf("GitLab job listed as %+v", g)
	}
	if q.Source != "queue" {
		t.Errorf("queue job listed with source %q", q.Source)
	}
	if one, err := c.Job(ctx, g.ID); err != nil || one.ExternalID != want {
		t.Errorf("GET /api/v1/jobs/%s: %+v, %v", g.ID, one, err)
	}
	sub := filepath.Join(m.cfg.StateDir, api.TokensDirName)
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	stok := api.NewToken()
	if err := os.WriteFile(filepath.Join(sub, "alice"), []byte(stok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.Token = stok
	if mine, err := c.Jobs(ctx); err != nil || len(mine) != 0 {
		t.Errorf("a submitter lists %d jobs (%v), want none of the admin's or GitLab's", len(mine), err)
	}
}
