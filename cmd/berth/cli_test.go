package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/jobsource/queue"
)

// cliServer is a berth server reduced to what the job and instance commands
// talk to: the real queue handler and a canned instance list.
type cliServer struct {
	q         *queue.Queue
	url       string
	instances []api.Instance
}

func newCLIServer(t *testing.T) *cliServer {
	t.Helper()
	q, err := queue.Open(t.TempDir(), queue.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	s := &cliServer{q: q}
	mux := http.NewServeMux()
	q.Register(mux)
	mux.HandleFunc("GET /api/v1/instances", func(w http.ResponseWriter, _ *http.Request) {
		api.WriteJSON(w, http.StatusOK, api.InstanceList{Instances: s.instances})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.url = srv.URL
	t.Setenv(api.ServerEnv, "http://127.0.0.1:1") // commands must use --server, or fail loudly
	// No token from the tester's own berth: this server checks none.
	t.Setenv(api.TokenEnv, "")
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	return s
}

// runCLI runs one command the way main does and returns its output.
func runCLI(t *testing.T, cmd *cobra.Command, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	err := cmd.Execute()
	return out.String(), errb.String(), err
}

// runOneJob plays the manager for one job: it takes the next job, writes
// output to its log and finishes it with the given result.
func (s *cliServer) runOneJob(t *testing.T, output string, res jobsource.Result) <-chan jobsource.Spec {
	t.Helper()
	got := make(chan jobsource.Spec, 1)
	go func() {
		ctx := context.Background()
		if err := s.q.WaitForJobs(ctx); err != nil {
			t.Error(err)
			return
		}
		j, err := s.q.Request(ctx)
		if err != nil || j == nil {
			t.Errorf("Request = %v, %v", j, err)
			return
		}
		j.Started("inst-1")
		fmt.Fprint(j.Log(), output)
		if err := j.Finish(ctx, res); err != nil {
			t.Error(err)
		}
		got <- j.Spec()
	}()
	return got
}

func TestSubmitPrintsIDAndQueuesTheJob(t *testing.T) {
	s := newCLIServer(t)
	t.Setenv("BERTH_TEST_TOKEN", "s3cret")
	out, errOut, err := runCLI(t, newSubmitCmd(), "", "--server", s.url, "--timeout", "5m",
		"--env", "A=1", "--env", "BERTH_TEST_TOKEN", "--", "echo", "hi;", "make test")
	if err != nil {
		t.Fatalf("submit: %v (%s)", err, errOut)
	}
	if out != "1\n" {
		t.Fatalf("stdout = %q, want just the job ID", out)
	}
	j := s.runOneJob(t, "", jobsource.Result{})
	spec := <-j
	if spec.Script != "echo hi; make test" || spec.Timeout != 5*time.Minute ||
		strings.Join(spec.Env, " ") != "A=1 BERTH_TEST_TOKEN=s3cret" {
		t.Errorf("spec = %+v", spec)
	}
}

func TestSubmitReadsScriptFromStdin(t *testing.T) {
	s := newCLIServer(t)
	if _, _, err := runCLI(t, newSubmitCmd(), "echo one\necho two\n", "--server", s.url, "-"); err != nil {
		t.Fatal(err)
	}
	job, err := s.q.Get("1")
	if err != nil {
		t.Fatal(err)
	}
	if job.Script != "echo one\necho two\n" {
		t.Errorf("script = %q", job.Script)
	}
}

func TestSubmitWaitExitsWithTheJobsExitCode(t *testing.T) {
	s := newCLIServer(t)
	s.runOneJob(t, "failing\n", jobsource.Result{ExitCode: 3, Failure: jobsource.FailureScript, Instance: "inst-1"})
	out, _, err := runCLI(t, newSubmitCmd(), "", "--server", s.url, "--wait", "--", "echo failing; exit 3")
	if out != "failing\n" {
		t.Errorf("stdout = %q, want the job's log only", out)
	}
	if err == nil || exitCode(err) != 3 {
		t.Fatalf("err = %v, exit code %d; want 3", err, exitCode(err))
	}
	if !strings.Contains(err.Error(), "exited with code 3") {
		t.Errorf("message %q", err)
	}
}

func TestSubmitWaitSuccess(t *testing.T) {
	s := newCLIServer(t)
	s.runOneJob(t, "hello\n", jobsource.Result{})
	out, errOut, err := runCLI(t, newSubmitCmd(), "", "--server", s.url, "--wait", "--", "echo hello")
	if err != nil || out != "hello\n" {
		t.Fatalf("submit --wait = %q, %v (%s)", out, err, errOut)
	}
}

func TestSubmitWaitSystemFailureExitsOneWithTheReason(t *testing.T) {
	s := newCLIServer(t)
	reason := "instance inst-1: connection lost: EOF"
	s.runOneJob(t, "started\n", jobsource.Result{ExitCode: -1, Failure: jobsource.FailureSystem, Message: reason})
	_, _, err := runCLI(t, newSubmitCmd(), "", "--server", s.url, "--wait", "--", "sleep 100")
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), reason) || !strings.Contains(err.Error(), "system failure") {
		t.Fatalf("err = %v (exit %d), want exit 1 naming the reason", err, exitCode(err))
	}
}

func TestSubmitSuspendReportsTheEnvironmentKey(t *testing.T) {
	s := newCLIServer(t)
	s.runOneJob(t, "deps ready\n", jobsource.Result{EnvKey: "env-7"})
	out, errOut, err := runCLI(t, newSubmitCmd(), "", "--server", s.url, "--wait", "--suspend", "--", "make deps")
	if err != nil {
		t.Fatal(err)
	}
	if out != "deps ready\n" {
		t.Errorf("stdout = %q: the key must not mix into the job's output", out)
	}
	if !strings.Contains(errOut, "environment key: env-7\n") {
		t.Errorf("stderr = %q, want the line 'environment key: env-7'", errOut)
	}

	out, errOut, err = runCLI(t, newSubmitCmd(), "", "--server", s.url, "--suspend", "--", "make deps")
	if err != nil || out != "2\n" || !strings.Contains(errOut, "berth jobs 2") {
		t.Errorf("submit --suspend without --wait = %q, %q, %v; want the ID and how to get the key", out, errOut, err)
	}
}

func TestSubmitWaitJSON(t *testing.T) {
	s := newCLIServer(t)
	s.runOneJob(t, "log line\n", jobsource.Result{})
	out, errOut, err := runCLI(t, newSubmitCmd(), "", "--server", s.url, "--wait", "--json", "--", "true")
	if err != nil {
		t.Fatal(err)
	}
	var j api.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil || j.State != api.JobSuccess {
		t.Fatalf("stdout %q is not the final job: %v", out, err)
	}
	if errOut != "log line\n" {
		t.Errorf("stderr = %q, want the log", errOut)
	}
}

func TestSubmitErrors(t *testing.T) {
	s := newCLIServer(t)
	_, _, err := runCLI(t, newSubmitCmd(), "", "--server", s.url, "--timeout", "-5m", "--", "true")
	if err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Errorf("negative timeout: %v", err)
	}
	_, _, err = runCLI(t, newSubmitCmd(), "", "--server", s.url, "--env", "BERTH_SURELY_UNSET_VAR", "--", "true")
	if err == nil || !strings.Contains(err.Error(), "is not set here") {
		t.Errorf("unset --env: %v", err)
	}
	_, _, err = runCLI(t, newSubmitCmd(), "", "--", "true") // BERTH_SERVER points nowhere
	if err == nil || !strings.Contains(err.Error(), "is `berth run` running at http://127.0.0.1:1") {
		t.Errorf("unreachable server: %v", err)
	}
}

func TestServerFromEnvironment(t *testing.T) {
	s := newCLIServer(t)
	t.Setenv(api.ServerEnv, s.url)
	out, _, err := runCLI(t, newSubmitCmd(), "", "--", "true")
	if err != nil || out != "1\n" {
		t.Fatalf("submit with BERTH_SERVER = %q, %v", out, err)
	}
}

func TestJobsTableDetailAndJSON(t *testing.T) {
	s := newCLIServer(t)
	out, _, err := runCLI(t, newJobsCmd(), "", "--server", s.url)
	if err != nil || !strings.Contains(out, "No jobs yet") {
		t.Fatalf("empty jobs = %q, %v", out, err)
	}
	s.runOneJob(t, "x\n", jobsource.Result{ExitCode: 2, Failure: jobsource.FailureScript, Message: "the script exited with code 2"})
	if _, _, err := runCLI(t, newSubmitCmd(), "", "--server", s.url, "--wait", "--", "exit 2"); exitCode(err) != 2 {
		t.Fatalf("submit --wait: %v", err)
	}
	if _, _, err := runCLI(t, newSubmitCmd(), "", "--server", s.url, "--env", "K=v", "--", "echo\nsecond line"); err != nil {
		t.Fatal(err)
	}

	out, _, err = runCLI(t, newJobsCmd(), "", "--server", s.url)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("table has %d lines, want header + 2:\n%s", len(lines), out)
	}
	header := lines[0]
	stateCol := strings.Index(header, "STATE")
	for _, want := range []struct{ line, id, state string }{{lines[1], "1", "failed"}, {lines[2], "2", "queued"}} {
		if !strings.HasPrefix(want.line, want.id+" ") || strings.Index(want.line, want.state) != stateCol {
			t.Errorf("row %q: want ID %s and state %s aligned under STATE", want.line, want.id, want.state)
		}
	}
	if !strings.Contains(lines[1], "inst-1") || !strings.Contains(lines[1], "exited with code 2") {
		t.Errorf("row %q lacks instance or reason", lines[1])
	}

	out, _, err = runCLI(t, newJobsCmd(), "", "--server", s.url, "--json")
	var list api.JobList
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Jobs) != 2 {
		t.Fatalf("jobs --json = %q, %v", out, err)
	}

	out, _, err = runCLI(t, newJobsCmd(), "", "--server", s.url, "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"State:", "failed (script failure)", "Exit code:", "2", "Instance:", "inst-1", "Script:\n  exit 2\n", "berth logs 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("detail lacks %q:\n%s", want, out)
		}
	}
	out, _, err = runCLI(t, newJobsCmd(), "", "--server", s.url, "--json", "2")
	var j api.Job
	if err != nil || json.Unmarshal([]byte(out), &j) != nil || j.ID != "2" || strings.Join(j.EnvNames, ",") != "K" {
		t.Fatalf("jobs 2 --json = %q, %v", out, err)
	}
	_, _, err = runCLI(t, newJobsCmd(), "", "--server", s.url, "42")
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("unknown job: %v", err)
	}

	out, _, err = runCLI(t, newJobsCmd(), "", "--server", s.url, "--cancel", "2")
	if err != nil || out != "job 2: canceled\n" {
		t.Errorf("jobs --cancel 2 = %q, %v", out, err)
	}
	_, _, err = runCLI(t, newJobsCmd(), "", "--server", s.url, "--cancel", "1")
	if err == nil || !strings.Contains(err.Error(), "nothing to cancel") {
		t.Errorf("cancel of a finished job: %v", err)
	}
}

func TestLogsCommand(t *testing.T) {
	s := newCLIServer(t)
	if _, _, err := runCLI(t, newSubmitCmd(), "", "--server", s.url, "--", "true"); err != nil {
		t.Fatal(err)
	}
	// Follow while the job is still queued; it returns when the job ends.
	s.runOneJob(t, "one\ntwo\n", jobsource.Result{})
	out, _, err := runCLI(t, newLogsCmd(), "", "--server", s.url, "--follow", "1")
	if err != nil || out != "one\ntwo\n" {
		t.Fatalf("logs --follow = %q, %v", out, err)
	}
	out, _, err = runCLI(t, newLogsCmd(), "", "--server", s.url, "1")
	if err != nil || out != "one\ntwo\n" {
		t.Fatalf("logs = %q, %v", out, err)
	}
	_, _, err = runCLI(t, newLogsCmd(), "", "--server", s.url, "9")
	if err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("logs of unknown job: %v", err)
	}
}

func TestInstancesCommand(t *testing.T) {
	s := newCLIServer(t)
	out, _, err := runCLI(t, newInstancesCmd(), "", "--server", s.url)
	if err != nil || !strings.Contains(out, "No instances") {
		t.Fatalf("empty instances = %q, %v", out, err)
	}
	created := time.Now().Add(-10 * time.Minute)
	ready := created.Add(20 * time.Second)
	s.instances = []api.Instance{
		{ID: "local-a", State: "running", Slots: api.SlotCounts{Idle: 1, Acquired: 1}, UseCount: 4, CreatedAt: created, ReadyAt: &ready},
		{ID: "local-bb", State: "suspended", Slots: api.SlotCounts{Suspended: 1}, EnvKeys: []string{"env-7"}, CreatedAt: created},
		{ID: "local-c", State: "deleting", Slots: api.SlotCounts{Unavailable: 2}, DeleteReason: "idle for 20m", CreatedAt: created},
	}
	out, _, err = runCLI(t, newInstancesCmd(), "", "--server", s.url)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"local-a", "1 acquired, 1 idle", "20s", "local-bb", "1 suspended", "env-7", "idle for 20m", "2 unavailable"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	col := strings.Index(lines[0], "STATE")
	for _, l := range lines[1:] {
		if l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("row %q is not aligned under STATE (column %d)", l, col)
		}
	}
	out, _, err = runCLI(t, newInstancesCmd(), "", "--server", s.url, "--json")
	var list api.InstanceList
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Instances) != 3 || list.Instances[1].EnvKeys[0] != "env-7" {
		t.Fatalf("instances --json = %q, %v", out, err)
	}
}
