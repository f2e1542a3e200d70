package gitlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

func newFake(t *testing.T, opts gitlabfake.Options) *gitlabfake.Fake {
	t.Helper()
	f := gitlabfake.New(opts)
	t.Cleanup(f.Close)
	return f
}

// newTestSource returns a source with intervals short enough for tests; the
// fake's own 3 s update interval is capped by MaxUpdateInterval.
func newTestSource(t *testing.T, f *gitlabfake.Fake, mod func(*Config)) *Source {
	t.Helper()
	cfg := Config{
		URL:               f.URL(),
		Token:             f.Token(),
		UpdateInterval:    20 * time.Millisecond,
		MaxUpdateInterval: 50 * time.Millisecond,
		KeepAliveInterval: 50 * time.Millisecond,
		RetryBaseDelay:    5 * time.Millisecond,
		RetryMaxDelay:     20 * time.Millisecond,
		BuildsDir:         filepath.Join(t.TempDir(), "builds"),
		Version:           "test",
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// takeJob polls until the source hands out a job.
func takeJob(t *testing.T, s *Source) *Job {
	t.Helper()
	ctx := testCtx(t)
	for {
		j, err := s.Request(ctx)
		if err != nil {
			t.Fatalf("Request: %v", err)
		}
		if j != nil {
			return j.(*Job)
		}
	}
}

// gitRepo makes a repository with one commit on main and returns its file://
// URL and the commit's SHA.
func gitRepo(t *testing.T) (string, string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello from the repo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "README")
	git("commit", "-q", "-m", "first")
	return "file://" + dir, git("rev-parse", "HEAD")
}

// run is what a manager did with one job.
type run struct {
	output   string // what the scripts printed, unmasked
	cancel   *jobsource.CancelRequest
	result   jobsource.Result
	err      error // from Finish
	tmpDir   string
	afterRan bool
}

// driver stands in for the manager: it runs the job's scripts with sh in a
// temp dir, streams output to the job's log, obeys cancel requests (kill the
// script; run after_script only on a graceful cancel) and finishes the job.
type driver struct {
	t       *testing.T
	started func() // called once the script runs
}

func (d driver) run(j jobsource.Job) run {
	t := d.t
	t.Helper()
	var r run
	r.tmpDir = t.TempDir()
	var mu sync.Mutex
	var out bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		out.Write(p)
		mu.Unlock()
		return j.Log().Write(p)
	})

	j.Started("test-instance")
	spec := j.Spec()
	// As the manager: the sources (and caches, artifacts) before the script.
	if err := j.(jobsource.Stager).Prepare(testCtx(t), localFiles{}); err != nil {
		r.result = jobsource.Result{ExitCode: -1, Failure: jobsource.FailureSystem, Message: err.Error(), Instance: "test-instance"}
		r.err = j.Finish(testCtx(t), r.result)
		r.output = out.String()
		return r
	}
	exit, req := d.sh(spec.Script, r.tmpDir, w, j.Canceled(), d.started)
	r.cancel = req
	if req == nil || req.Graceful {
		r.afterRan = true
		d.sh(spec.AfterScript, r.tmpDir, w, nil, nil)
	}
	switch {
	case req != nil:
		r.result = jobsource.Result{ExitCode: -1, Failure: jobsource.FailureCanceled}
	case exit != 0:
		r.result = jobsource.Result{ExitCode: exit, Failure: jobsource.FailureScript}
	default:
		r.result = jobsource.Result{ExitCode: 0}
	}
	r.result.Instance = "test-instance"
	r.result = j.(jobsource.Stager).Collect(testCtx(t), localFiles{}, r.result)
	r.err = j.Finish(testCtx(t), r.result)
	mu.Lock()
	r.output = out.String()
	mu.Unlock()
	return r
}

// sh runs script and returns its exit code, or the cancel request that
// stopped it.
func (d driver) sh(script, tmp string, w writerFunc, canceled <-chan jobsource.CancelRequest, started func()) (int, *jobsource.CancelRequest) {
	t := d.t
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if started != nil {
		started()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var req *jobsource.CancelRequest
	select {
	case err := <-done:
		return exitCode(t, err), nil
	case c := <-canceled:
		req = &c
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return -1, req
	}
}

func exitCode(t *testing.T, err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	default:
		t.Fatalf("running script: %v", err)
		return -1
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// waitFor polls cond until it holds; the test's deadline bounds it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// finalUpdates returns the states of PUT /jobs/:id bodies other than keep-alives.
func finalUpdates(f *gitlabfake.Fake) []string {
	var states []string
	for _, r := range f.Requests() {
		if r.Endpoint != gitlabfake.EndpointUpdate {
			continue
		}
		var b struct {
			State string `json:"state"`
		}
		_ = json.Unmarshal(r.Body, &b)
		if b.State != "running" {
			states = append(states, b.State)
		}
	}
	return states
}
