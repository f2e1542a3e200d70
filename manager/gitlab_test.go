package manager

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
)

func TestMain(m *testing.M) {
	local.RunSandboxIfRequested() // the local provider re-executes this binary as a sandbox
	os.Exit(m.Run())
}

// startManager runs an in-process berth on real sandboxes with the given
// config and stops it (and deletes its sandboxes) when the test ends.
func startManager(t *testing.T, toml string) *Manager {
	t.Helper()
	var w io.Writer = io.Discard
	if testing.Verbose() {
		w = os.Stderr
	}
	return startManagerLog(t, toml, w)
}

// startManagerLog is startManager with berth's log written to w.
func startManagerLog(t *testing.T, toml string, w io.Writer) *Manager {
	t.Helper()
	dir := t.TempDir()
	full := fmt.Sprintf("listen = \"127.0.0.1:0\"\nstate_dir = %q\n%s", filepath.Join(dir, "state"), toml)
	cfg, err := config.Parse([]byte(full), filepath.Join(dir, "berth.toml"))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(w, nil))
	ctx, cancel := context.WithCancel(context.Background())
	m, err := New(ctx, cfg, log, Options{ShutdownGrace: 10 * time.Second, UpdateInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	m.opts.Ready = ready
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("manager stopped at start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		<-done
		deleteSandboxes(t, filepath.Join(dir, "state", "provider", "local"))
	})
	return m
}

func deleteSandboxes(t testing.TB, stateDir string) {
	p := local.New()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.Init(ctx, provider.Settings{StateDir: stateDir}); err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	var ids []string
	p.Update(ctx, func(id string, _ provider.State) { ids = append(ids, id) })
	if len(ids) > 0 {
		p.Decrease(ctx, ids)
	}
}

func TestGitLabFiftyJobsOnFiveInstances(t *testing.T) {
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	defer fake.Close()
	repo, sha := gitlabfake.Repo(t)
	secret := "s3cr3t-value"
	var ids []int64
	for i := range 50 {
		script := []string{"cat README", fmt.Sprintf("echo job %d uses $SECRET", i)}
		if i%10 == 9 {
			script = append(script, "exit 4")
		}
		ids = append(ids, fake.AddJob(gitlabfake.JobSpec{
			RepoURL: repo, Ref: "main", Sha: sha, Script: script,
			Variables: []gitlabfake.Variable{{Key: "SECRET", Value: secret, Masked: true},
				// The repository is a directory on the host, owned by
				// another uid than the job's; a real GitLab serves it
				// over HTTP, where git asks nothing of ownership.
				{Key: "GIT_CONFIG_GLOBAL", Value: strings.TrimPrefix(repo, "file://") + "/jobs.gitconfig"}},
		}))
	}
	m := startManager(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
request_concurrency = 4
check_interval = "100ms"
[autoscaler]
max_instances = 5
[autoscaler.provider_config]
# The fake GitLab serves the repository from the host's disk; jobs see
# only the host paths listed here.
host_paths = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", %q]
[[autoscaler.policy]]
idle_count = 2
`, fake.URL(), strings.TrimPrefix(repo, "file://")))

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := fake.WaitAllDone(ctx); err != nil {
		t.Fatalf("jobs did not all finish: %v", err)
	}
	for i, id := range ids {
		j := fake.Job(id)
		trace := j.Trace()
		if strings.Contains(trace, secret) {
			t.Errorf("job %d: the masked value appears in the trace", id)
		}
		if !strings.Contains(trace, "checked out by berth") || !strings.Contains(trace, fmt.Sprintf("job %d uses [MASKED]", i)) {
			t.Errorf("job %d: trace lacks the script's output:\n%s", id, trace)
		}
		wantState, wantCode := "success", 0
		if i%10 == 9 {
			wantState, wantCode = "failed", 4
			if j.FailureReason() != "script_failure" {
				t.Errorf("job %d: failure_reason %q, want script_failure", id, j.FailureReason())
			}
		}
		if j.ReportedState() != wantState || j.ExitCode() != wantCode {
			t.Errorf("job %d: %s exit %d, want %s exit %d", id, j.ReportedState(), j.ExitCode(), wantState, wantCode)
		}
	}
	counts := m.fleet.Counts()
	requests := fake.Count("request", 0)
	if requests > counts.Granted {
		t.Errorf("%d job requests but only %d bookings: a job was requested without a booked slot", requests, counts.Granted)
	}
	if fake.MaxConcurrentPolls() > 5 {
		t.Errorf("%d polls at once with 5 slots", fake.MaxConcurrentPolls())
	}
	t.Logf("50 jobs: %d job requests, %d bookings, max %d polls at once", requests, counts.Granted, fake.MaxConcurrentPolls())
}
