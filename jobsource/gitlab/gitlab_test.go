package gitlab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

// A whole job: sources fetched at the SHA, variables quoted, script lines
// echoed and run, after_script, and GitLab ending up with exactly the log
// the scripts printed, framed by berth's own lines.
func TestJobRunsAndTraceEqualsOutput(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	repo, sha := gitRepo(t)
	tricky := `it's "quoted" $HOME ` + "`x` \\n"
	id := f.AddJob(gitlabfake.JobSpec{
		RepoURL:     repo,
		Sha:         sha,
		Refspecs:    []string{"+refs/heads/main:refs/remotes/origin/main"},
		Timeout:     90 * time.Second,
		Script:      []string{"cat README", `echo "$TRICKY"`, `echo "ref=$LINKED"`, "git rev-parse HEAD"},
		AfterScript: []string{`echo "after: $CI_JOB_STATUS"`},
		Variables: []gitlabfake.Variable{
			{Key: "TRICKY", Value: tricky, Raw: true},
			{Key: "LINKED", Value: "${CI_COMMIT_REF_NAME}-x"},
		},
	})
	s := newTestSource(t, f, nil)
	j := takeJob(t, s)
	if j.ID() != fmt.Sprint(id) {
		t.Fatalf("job ID = %s, want %d", j.ID(), id)
	}
	if got := j.Spec().Timeout; got != 90*time.Second {
		t.Errorf("Spec().Timeout = %v, want 90s from runner_info.timeout", got)
	}
	r := driver{t: t}.run(j)
	if r.err != nil {
		t.Fatalf("Finish: %v", r.err)
	}

	for _, want := range []string{
		"hello from the repo\n",
		"\x1b[32;1m$ cat README\x1b[0;m\n",
		tricky + "\n",
		"ref=main-x\n",
		sha + "\n",
		"after: success\n",
	} {
		if !strings.Contains(r.output, want) {
			t.Errorf("script output lacks %q:\n%s", want, r.output)
		}
	}
	fj := f.Job(id)
	// berth's own lines (getting the sources) come between the header
	// and the script's output.
	head := fmt.Sprintf("Running with berth test on %s (system ID %s)\nRunning on instance test-instance\n", s.Name(), s.cfg.SystemID)
	if got := fj.Trace(); !strings.HasPrefix(got, head) || !strings.HasSuffix(got, r.output+"Job succeeded\n") ||
		!strings.Contains(got, "Getting source from Git repository") {
		t.Errorf("GitLab's trace differs from the output.\n got: %q\nwant: %q...%q", got, head, r.output+"Job succeeded\n")
	}
	if fj.State() != gitlabfake.StateSuccess || fj.ExitCode() != 0 || fj.FailureReason() != "" {
		t.Errorf("job = %s exit %d reason %q, want success exit 0", fj.State(), fj.ExitCode(), fj.FailureReason())
	}
	if n := f.Count(gitlabfake.EndpointUpdate, 202); n < 1 {
		t.Errorf("final update never saw GitLab's 202 (got %d); the fake answers 202 first", n)
	}
	if n := f.Count(gitlabfake.EndpointTrace, 400); n != 0 {
		t.Errorf("%d log updates were rejected as malformed (Content-Range)", n)
	}
	// Protocol hygiene: every call has its own request ID and the right token.
	ids := map[string]bool{}
	for _, req := range f.Requests() {
		if req.RequestID == "" || ids[req.RequestID] {
			t.Errorf("%s %s: X-Request-Id %q missing or reused", req.Method, req.Path, req.RequestID)
		}
		ids[req.RequestID] = true
		switch req.Endpoint {
		case gitlabfake.EndpointRequest:
			if req.RunnerToken != f.Token() {
				t.Errorf("job request without RUNNER-TOKEN header")
			}
		case gitlabfake.EndpointTrace, gitlabfake.EndpointUpdate:
			if req.JobToken != fj.Token() {
				t.Errorf("%s %s without JOB-TOKEN header", req.Method, req.Path)
			}
		}
	}
	// The build dir and the temp dir (file variables) are removed at the end.
	if left, _ := filepath.Glob(filepath.Join(r.tmpDir, "berth-gitlab-*")); len(left) != 0 {
		t.Errorf("job temp dir left behind: %v", left)
	}
}

func TestScriptStopsAtFirstFailure(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{
		Script:    []string{"echo one", "exit 3", "echo never"},
		Variables: []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}},
	})
	s := newTestSource(t, f, nil)
	r := driver{t: t}.run(takeJob(t, s))
	if r.err != nil {
		t.Fatal(r.err)
	}
	fj := f.Job(id)
	if !strings.Contains(fj.Trace(), "one\n") || strings.Contains(fj.Trace(), "never") {
		t.Errorf("trace should have stopped after exit 3:\n%s", fj.Trace())
	}
	if !strings.HasSuffix(fj.Trace(), "ERROR: Job failed: exit code 3\n") {
		t.Errorf("trace does not end with the failure line:\n%s", fj.Trace())
	}
	if fj.State() != gitlabfake.StateFailed || fj.FailureReason() != "script_failure" || fj.ExitCode() != 3 {
		t.Errorf("job = %s %q exit %d, want failed script_failure exit 3", fj.State(), fj.FailureReason(), fj.ExitCode())
	}
}

func TestVerify(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	s := newTestSource(t, f, nil)
	if err := s.Verify(testCtx(t)); err != nil {
		t.Fatalf("Verify with the right token: %v", err)
	}
	reqs := f.Requests()
	var body struct {
		Token    string `json:"token"`
		SystemID string `json:"system_id"`
		Info     struct {
			Name, Executor, Shell string
			Features              map[string]bool
		} `json:"info"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Token != f.Token() || reqs[0].RunnerToken != f.Token() || body.SystemID == "" ||
		body.Info.Name != "berth" || body.Info.Executor != "berth" || body.Info.Shell == "" ||
		!body.Info.Features["cancel_gracefully"] || !body.Info.Features["trace_checksum"] {
		t.Errorf("verify request = %s (RUNNER-TOKEN %q)", reqs[0].Body, reqs[0].RunnerToken)
	}
}

func TestBadTokenAtStart(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	s := newTestSource(t, f, func(c *Config) { c.Token = "glrt-wrong" })
	err := s.Verify(testCtx(t))
	if !errors.Is(err, ErrTokenRejected) {
		t.Fatalf("Verify with a wrong token = %v, want ErrTokenRejected", err)
	}
	for _, want := range []string{f.URL(), "glrt-", "Runners", "token_file"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := s.Request(testCtx(t)); !errors.Is(err, ErrTokenRejected) {
		t.Errorf("Request with a wrong token = %v, want ErrTokenRejected", err)
	}
}

func TestConfigErrors(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("glrt-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{URL: "https://gitlab.example.com/api/v4/", TokenFile: tokenFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Token != "glrt-from-file" || s.cfg.URL != "https://gitlab.example.com" ||
		s.cfg.RequestConcurrency != 4 || s.CheckInterval() != 3*time.Second || s.Name() != "gitlab:https://gitlab.example.com" {
		t.Errorf("defaults not applied: %+v", s.cfg)
	}
	for _, c := range []Config{
		{Token: "x"},
		{URL: "gitlab.example.com", Token: "x"},
		{URL: "https://gitlab.example.com"},
		{URL: "https://gitlab.example.com", Token: "x", TokenFile: tokenFile},
	} {
		if _, err := New(c, nil); err == nil {
			t.Errorf("New(%+v) succeeded", c)
		}
	}
}

func TestRequestRetriesConflict(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	f.FailNextRequests(409, 2)
	f.AddJob(gitlabfake.JobSpec{Script: []string{"true"}})
	s := newTestSource(t, f, nil)
	j, err := s.Request(testCtx(t))
	if err != nil || j == nil {
		t.Fatalf("Request = %v, %v; want the job after two 409s", j, err)
	}
	if n := f.Count(gitlabfake.EndpointRequest, 409); n != 2 {
		t.Errorf("409 answers = %d, want 2", n)
	}

	// When every attempt loses the race there is no job, and no error.
	f.FailNextRequests(409, 10)
	s = newTestSource(t, f, func(c *Config) { c.RetryLimit = 2 })
	if j, err := s.Request(testCtx(t)); j != nil || err != nil {
		t.Errorf("Request after only 409s = %v, %v; want nil, nil", j, err)
	}
}

func TestRequestRetriesUnavailable(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	f.FailNextRequests(503, 3)
	f.AddJob(gitlabfake.JobSpec{Script: []string{"true"}})
	s := newTestSource(t, f, nil)
	if j, err := s.Request(testCtx(t)); err != nil || j == nil {
		t.Fatalf("Request = %v, %v; want the job after three 503s", j, err)
	}
	if n := f.Count(gitlabfake.EndpointRequest, 503); n != 3 {
		t.Errorf("503 answers = %d, want 3", n)
	}

	f.FailNextRequests(503, 10)
	s = newTestSource(t, f, func(c *Config) { c.RetryLimit = 2 })
	if _, err := s.Request(testCtx(t)); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Request after only 503s = %v, want ErrUnavailable", err)
	}
	if n := f.Count(gitlabfake.EndpointRequest, 503); n != 3+3 {
		t.Errorf("503 answers = %d, want 3 more (one try and two retries)", n)
	}
}

// After a 204 the next poll sends last_update, so GitLab holds it; a job
// queued meanwhile is handed out on that same poll.
func TestRequestLongPollsWithLastUpdate(t *testing.T) {
	f := newFake(t, gitlabfake.Options{LongPoll: 10 * time.Second})
	s := newTestSource(t, f, nil)
	ctx := testCtx(t)
	if j, err := s.Request(ctx); j != nil || err != nil {
		t.Fatalf("first Request = %v, %v; want nil, nil", j, err)
	}
	got := make(chan jobsource.Job, 1)
	go func() {
		j, _ := s.Request(ctx)
		got <- j
	}()
	waitFor(t, "the second poll to be held", func() bool { return f.PollsInFlight() == 1 })
	f.AddJob(gitlabfake.JobSpec{Script: []string{"true"}})
	if j := <-got; j == nil {
		t.Fatal("long-poll returned no job")
	}
	var first, second struct {
		LastUpdate string `json:"last_update"`
	}
	reqs := f.Requests()
	_ = json.Unmarshal(reqs[0].Body, &first)
	_ = json.Unmarshal(reqs[1].Body, &second)
	if first.LastUpdate != "" || second.LastUpdate == "" {
		t.Errorf("last_update: first %q (want empty), second %q (want the 204's X-GitLab-Last-Update)", first.LastUpdate, second.LastUpdate)
	}
}

func TestRequestConcurrencyBounded(t *testing.T) {
	f := newFake(t, gitlabfake.Options{LongPoll: 100 * time.Millisecond})
	s := newTestSource(t, f, func(c *Config) { c.RequestConcurrency = 2 })
	ctx := testCtx(t)
	// Prime last_update so that every later poll is held.
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
	if n := f.MaxConcurrentPolls(); n != 2 {
		t.Errorf("max polls in flight = %d, want 2 (request_concurrency)", n)
	}
}
