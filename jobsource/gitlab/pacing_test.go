package gitlab

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

// pacedSource is a test source that takes GitLab's interval as it comes
// (MaxUpdateInterval far above it) and would touch a quiet job every 50 ms
// if GitLab's interval did not pace it.
func pacedSource(t *testing.T, f *gitlabfake.Fake) *Source {
	return newTestSource(t, f, func(c *Config) { c.MaxUpdateInterval = time.Hour })
}

// A quiet job is touched once per GitLab interval (1 s here), not every
// KeepAliveInterval (issue 42: ~7x gitlab-runner's PUTs on a fleet of
// quiet jobs). The bound is an upper one on the count: a slow machine
// only sends fewer.
func TestQuietJobTouchedOncePerGitLabInterval(t *testing.T) {
	f := newFake(t, gitlabfake.Options{TraceUpdateInterval: 1})
	id := f.AddJob(gitlabfake.JobSpec{Script: []string{"true"}, Variables: noGit})
	j := takeJob(t, pacedSource(t, f))
	waitFor(t, "the first log update", func() bool { return f.Count(gitlabfake.EndpointTrace, 0) > 0 })
	start := time.Now()
	time.Sleep(2500 * time.Millisecond)
	n, elapsed := f.Job(id).KeepAlives(), time.Since(start)
	if limit := int(elapsed/time.Second) + 1; n > limit {
		t.Errorf("%d keep-alives in %s with GitLab's interval of 1 s, want at most %d", n, elapsed.Round(time.Millisecond), limit)
	}
	if err := j.Finish(testCtx(t), jobsource.Result{}); err != nil {
		t.Fatal(err)
	}
}

// A chatty job's log goes out once per GitLab interval, in one PATCH.
func TestChattyJobPatchesOncePerGitLabInterval(t *testing.T) {
	f := newFake(t, gitlabfake.Options{TraceUpdateInterval: 1})
	id := f.AddJob(gitlabfake.JobSpec{Script: []string{"true"}, Variables: noGit})
	j := takeJob(t, pacedSource(t, f))
	waitFor(t, "the first log update", func() bool { return f.Count(gitlabfake.EndpointTrace, 0) > 0 })
	before := f.Count(gitlabfake.EndpointTrace, 0)
	start := time.Now()
	for i := 0; time.Since(start) < 2500*time.Millisecond; i++ {
		fmt.Fprintf(j.Log(), "line %d\n", i)
		time.Sleep(10 * time.Millisecond)
	}
	n, elapsed := f.Count(gitlabfake.EndpointTrace, 0)-before, time.Since(start)
	if limit := int(elapsed/time.Second) + 1; n > limit {
		t.Errorf("%d log updates in %s with GitLab's interval of 1 s, want at most %d", n, elapsed.Round(time.Millisecond), limit)
	}
	if k := f.Job(id).KeepAlives(); k != 0 {
		t.Errorf("%d keep-alives for a job whose log kept GitLab informed", k)
	}
	if err := j.Finish(testCtx(t), jobsource.Result{}); err != nil {
		t.Fatal(err)
	}
	if tr := f.Job(id).Trace(); !strings.Contains(tr, "line 0\n") {
		t.Errorf("trace:\n%s", tr)
	}
}

// A job that went quiet is still touched once GitLab's interval passes,
// so a cancel reaches it (before the sleep ends).
func TestQuietJobCanceledWithinTheInterval(t *testing.T) {
	f := newFake(t, gitlabfake.Options{TraceUpdateInterval: 1})
	id := f.AddJob(gitlabfake.JobSpec{Script: []string{"echo tick; sleep 20"}, Variables: noGit})
	r := driver{t: t, started: func() {
		waitFor(t, "a tick in GitLab's log", func() bool { return strings.Contains(f.Job(id).Trace(), "tick") })
		f.Job(id).Cancel()
	}}.run(takeJob(t, pacedSource(t, f)))
	if r.cancel == nil {
		t.Fatalf("no cancel reached the job")
	}
}

func TestDefaultPacingIsGitLabRunners(t *testing.T) {
	c, err := Config{URL: "https://gitlab.example.com", Token: "t"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	// gitlab-runner common/consts.go: DefaultUpdateInterval,
	// MaxUpdateInterval, MinTraceForceSendInterval.
	if c.UpdateInterval != 3*time.Second || c.MaxUpdateInterval != 15*time.Minute || c.KeepAliveInterval != 30*time.Second {
		t.Errorf("update %s, max %s, keep-alive %s", c.UpdateInterval, c.MaxUpdateInterval, c.KeepAliveInterval)
	}
}
