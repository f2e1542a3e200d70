package gitlab

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

// A reload's settings reach the next job and the next polls; the job
// GitLab handed out before keeps its builds dir and log limit, and its
// log reaches GitLab as that limit cut it.
func TestNewSettingsReachTheNextJobNotTheRunningOne(t *testing.T) {
	f := newFake(t, gitlabfake.Options{LongPoll: 100 * time.Millisecond})
	s := newTestSource(t, f, func(c *Config) { c.RequestConcurrency = 1; c.OutputLimit = 100; c.BuildsDir = "/builds/before" })
	ctx := testCtx(t)
	f.AddJob(gitlabfake.JobSpec{Script: []string{"true"}})
	running := takeJob(t, s)

	s.SetSettings(Settings{RequestConcurrency: 3, OutputLimit: 1000, BuildsDir: "/builds/after", CheckInterval: time.Second})
	if got := s.CheckInterval(); got != time.Second {
		t.Errorf("check interval after the change = %v; want 1s", got)
	}
	f.AddJob(gitlabfake.JobSpec{Script: []string{"true"}})
	next := takeJob(t, s)

	line := strings.Repeat("x", 199) + "\n"
	for _, j := range []*Job{running, next} {
		if _, err := j.Log().Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		if err := j.Finish(ctx, jobsource.Result{}); err != nil {
			t.Fatal(err)
		}
	}
	if tr := f.Job(running.p.ID).Trace(); !strings.Contains(tr, "exceeded limit of 100 bytes") {
		t.Errorf("the job handed out before the change lost its 100-byte log limit:\n%s", tr)
	}
	if tr := f.Job(next.p.ID).Trace(); strings.Contains(tr, "exceeded limit") || !strings.Contains(tr, line) {
		t.Errorf("the job handed out after the change was cut, not at 1000 bytes:\n%s", tr)
	}
	if sc := running.spec.Script; !strings.Contains(sc, "/builds/before") || strings.Contains(sc, "/builds/after") {
		t.Errorf("the job handed out before the change does not run in /builds/before:\n%s", sc)
	}
	if sc := next.spec.Script; !strings.Contains(sc, "/builds/after") {
		t.Errorf("the job handed out after the change does not run in /builds/after:\n%s", sc)
	}

	// Three polls may now be in flight (one before); prime last_update so
	// that every poll is held.
	before := f.MaxConcurrentPolls()
	if _, err := s.Request(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Request(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := f.MaxConcurrentPolls(); before != 1 || n != 3 {
		t.Errorf("polls in flight at most %d before the change, %d after; want 1, then 3 (request_concurrency)", before, n)
	}
}
