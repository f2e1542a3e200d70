package gitlab

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

var noGit = []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}}

// GitLab acknowledges a log update and then loses it; the next update gets
// 416 with GitLab's real size and the log is resent from there.
func TestTraceRangeMismatch(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{Script: []string{"echo one", "echo two"}, Variables: noGit})
	f.Job(id).LoseNextTracePatches(1)
	s := newTestSource(t, f, nil)
	j := takeJob(t, s)
	// The header line goes out (and is lost) before the script runs.
	waitFor(t, "the first log update", func() bool { return f.Count(gitlabfake.EndpointTrace, 202) == 1 })
	r := driver{t: t}.run(j)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := f.Count(gitlabfake.EndpointTrace, 416); n < 1 {
		t.Errorf("416 answers = %d, want at least 1", n)
	}
	fj := f.Job(id)
	if !strings.HasPrefix(fj.Trace(), "Running with berth") || !strings.Contains(fj.Trace(), "two\n") ||
		!strings.HasSuffix(fj.Trace(), "Job succeeded\n") {
		t.Errorf("trace after resend is incomplete:\n%s", fj.Trace())
	}
	if fj.State() != gitlabfake.StateSuccess {
		t.Errorf("state = %s, want success", fj.State())
	}
}

// An injected 416 (GitLab's Range says where to continue) is handled too.
func TestTraceInjected416(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{Script: []string{"echo hi"}, Variables: noGit})
	f.Job(id).FailNextTrace(416, 2)
	s := newTestSource(t, f, nil)
	r := driver{t: t}.run(takeJob(t, s))
	if r.err != nil {
		t.Fatal(r.err)
	}
	fj := f.Job(id)
	if f.Count(gitlabfake.EndpointTrace, 416) != 2 || fj.State() != gitlabfake.StateSuccess || !strings.Contains(fj.Trace(), "hi\n") {
		t.Errorf("416s = %d, state %s, trace:\n%s", f.Count(gitlabfake.EndpointTrace, 416), fj.State(), fj.Trace())
	}
}

// GitLab's copy fails the checksum in the final update: 412, the whole log is
// resent and the update repeated.
func TestUpdateChecksumMismatch(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{Script: []string{"echo one", "echo two"}, Variables: noGit})
	f.Job(id).CorruptTrace()
	s := newTestSource(t, f, nil)
	r := driver{t: t}.run(takeJob(t, s))
	if r.err != nil {
		t.Fatal(r.err)
	}
	fj := f.Job(id)
	if n := f.Count(gitlabfake.EndpointUpdate, 412); n != 1 {
		t.Errorf("412 answers = %d, want 1", n)
	}
	if want := "Running with berth"; !strings.HasPrefix(fj.Trace(), want) || !strings.Contains(fj.Trace(), "two\n") || !strings.HasSuffix(fj.Trace(), "Job succeeded\n") {
		t.Errorf("trace was not resent whole:\n%s", fj.Trace())
	}
	if fj.State() != gitlabfake.StateSuccess {
		t.Errorf("state = %s, want success", fj.State())
	}
}

// longScript prints until killed, so log updates keep flowing.
var longScript = []string{`i=0; while [ $i -lt 400 ]; do echo tick $i; sleep 0.05; i=$((i+1)); done`}

// A 403 on a log update means the job no longer runs in GitLab: it is
// stopped at once, without after_script, and no result is sent.
func TestTrace403StopsJob(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{Script: longScript, AfterScript: []string{"echo after"}, Variables: noGit})
	s := newTestSource(t, f, nil)
	j := takeJob(t, s)
	r := driver{t: t, started: func() {
		waitFor(t, "a tick in GitLab's log", func() bool { return strings.Contains(f.Job(id).Trace(), "tick") })
		f.Job(id).FailNextTrace(403, 1)
	}}.run(j)
	if r.cancel == nil || r.cancel.Graceful {
		t.Fatalf("cancel request = %+v, want a hard cancel", r.cancel)
	}
	if r.err != nil {
		t.Errorf("Finish after 403 = %v, want nil (nobody left to tell)", r.err)
	}
	if got := finalUpdates(f); len(got) != 0 {
		t.Errorf("final updates sent after 403: %v", got)
	}
	if _, open := <-j.Canceled(); open {
		t.Error("Canceled() not closed after a hard cancel")
	}
}

// A job canceled in GitLab (no graceful cancel) is stopped at once.
func TestCancel(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{Script: longScript, AfterScript: []string{"echo after"}, Variables: noGit})
	s := newTestSource(t, f, nil)
	r := driver{t: t, started: func() {
		waitFor(t, "a tick in GitLab's log", func() bool { return strings.Contains(f.Job(id).Trace(), "tick") })
		f.Job(id).Cancel()
	}}.run(takeJob(t, s))
	if r.cancel == nil || r.cancel.Graceful || r.afterRan {
		t.Fatalf("cancel request = %+v (after_script ran: %v), want a hard cancel", r.cancel, r.afterRan)
	}
	if r.err != nil {
		t.Errorf("Finish = %v", r.err)
	}
	if st := f.Job(id).State(); st != gitlabfake.StateCanceled {
		t.Errorf("state = %s, want canceled", st)
	}
}

// Job-Status: canceling asks for a graceful stop: after_script runs, its
// output reaches GitLab, and the final update makes the job canceled.
func TestCanceling(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{Script: longScript, AfterScript: []string{`echo "after: $CI_JOB_STATUS"`}, Variables: noGit})
	s := newTestSource(t, f, nil)
	r := driver{t: t, started: func() {
		waitFor(t, "a tick in GitLab's log", func() bool { return strings.Contains(f.Job(id).Trace(), "tick") })
		f.Job(id).Canceling()
	}}.run(takeJob(t, s))
	if r.cancel == nil || !r.cancel.Graceful || !r.afterRan {
		t.Fatalf("cancel request = %+v (after_script ran: %v), want graceful", r.cancel, r.afterRan)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	fj := f.Job(id)
	if fj.State() != gitlabfake.StateCanceled || fj.ReportedState() != "failed" {
		t.Errorf("state %s (reported %s), want canceled (reported failed)", fj.State(), fj.ReportedState())
	}
	// job_canceled is not among GitLab's failure reasons: it falls back.
	if fj.FailureReason() != "unknown_failure" {
		t.Errorf("failure_reason = %q, want unknown_failure", fj.FailureReason())
	}
	if !strings.Contains(fj.Trace(), "after: canceled\n") || !strings.HasSuffix(fj.Trace(), "ERROR: Job failed: canceled\n") {
		t.Errorf("trace lacks after_script output or the cancel line:\n%s", fj.Trace())
	}
}

// With the log idle, the job is kept alive with PUT state=running.
func TestKeepAlive(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{Script: []string{"true"}, Variables: noGit})
	s := newTestSource(t, f, nil)
	j := takeJob(t, s)
	waitFor(t, "two keep-alives", func() bool { return f.Job(id).KeepAlives() >= 2 })
	if err := j.Finish(testCtx(t), jobsource.Result{ExitCode: 0}); err != nil {
		t.Fatal(err)
	}
	if st := f.Job(id).State(); st != gitlabfake.StateSuccess {
		t.Errorf("state = %s", st)
	}
}

// A system failure is reported as runner_system_failure only where GitLab
// lists it; here it does not, so unknown_failure. The log says which
// instance failed and what to do.
func TestFailureReasonsFallback(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{Script: []string{"true"}, Variables: noGit,
		FailureReasons: []string{"script_failure", "unknown_failure"}})
	s := newTestSource(t, f, nil)
	j := takeJob(t, s)
	j.Started("i-0abc")
	err := j.Finish(testCtx(t), jobsource.Result{ExitCode: -1, Failure: jobsource.FailureSystem,
		Message: "instance i-0abc was deleted by the provider", Instance: "i-0abc"})
	if err != nil {
		t.Fatal(err)
	}
	fj := f.Job(id)
	if fj.State() != gitlabfake.StateFailed || fj.FailureReason() != "unknown_failure" || fj.ExitCode() != -1 {
		t.Errorf("job = %s %q exit %d, want failed unknown_failure, no exit code", fj.State(), fj.FailureReason(), fj.ExitCode())
	}
	if !strings.Contains(fj.Trace(), "ERROR: Job failed (system failure) on instance i-0abc: instance i-0abc was deleted by the provider") {
		t.Errorf("trace lacks the actionable system failure line:\n%s", fj.Trace())
	}

	// Where GitLab lists it, the precise reason is sent.
	id = f.AddJob(gitlabfake.JobSpec{Script: []string{"true"}, Variables: noGit})
	j = takeJob(t, s)
	if err := j.Finish(testCtx(t), jobsource.Result{ExitCode: -1, Failure: jobsource.FailureTimeout}); err != nil {
		t.Fatal(err)
	}
	if r := f.Job(id).FailureReason(); r != "job_execution_timeout" {
		t.Errorf("timeout reported as %q", r)
	}
}

func TestAllowedReason(t *testing.T) {
	all := gitlabfake.DefaultFailureReasons
	for _, c := range []struct {
		want    string
		allowed []string
		got     string
	}{
		{"script_failure", nil, "script_failure"},
		{"runner_configuration_error", nil, "script_failure"},
		{"runner_configuration_error", all, "runner_configuration_error"},
		{"runner_external_dependency_failure", []string{"runner_system_failure"}, "runner_system_failure"},
		{"runner_interrupted", []string{"script_failure"}, "unknown_failure"},
		{"job_canceled", all, "unknown_failure"},
		{"job_canceled", []string{"job_canceled"}, "job_canceled"},
		{"runner_system_failure", []string{"script_failure"}, "unknown_failure"},
		{"", all, ""},
	} {
		if got := allowedReason(c.want, c.allowed); got != c.got {
			t.Errorf("allowedReason(%q, %v) = %q, want %q", c.want, c.allowed, got, c.got)
		}
	}
}

// berth watches a running job through AfterCancel, not a goroutine per
// job: its function gets GitLab's first request, and a hard cancel after
// a graceful one does not change what it got.
func TestAfterCancelGetsTheFirstRequest(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(gitlabfake.JobSpec{Script: longScript, Variables: noGit})
	j := takeJob(t, newTestSource(t, f, nil))
	got := make(chan jobsource.CancelRequest, 2)
	j.AfterCancel(func(r jobsource.CancelRequest) { got <- r })
	stop := j.AfterCancel(func(jobsource.CancelRequest) { t.Error("a stopped AfterCancel function ran") })
	if !stop() {
		t.Error("stopping an AfterCancel function before any cancel reported false")
	}
	f.Job(id).Canceling()
	if r := receive(t, got); !r.Graceful {
		t.Errorf("AfterCancel after Job-Status canceling got %+v, want graceful", r)
	}
	f.Job(id).Cancel()
	waitFor(t, "the hard cancel", func() bool {
		select {
		case _, open := <-j.Canceled():
			return !open
		default:
			return false
		}
	})
	j.AfterCancel(func(r jobsource.CancelRequest) { got <- r })
	if r := receive(t, got); !r.Graceful {
		t.Errorf("AfterCancel after the hard cancel got %+v, want the first (graceful) request", r)
	}
	j.Finish(testCtx(t), jobsource.Result{ExitCode: -1, Failure: jobsource.FailureCanceled})
}

func receive(t *testing.T, ch chan jobsource.CancelRequest) jobsource.CancelRequest {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("the AfterCancel function never ran")
		return jobsource.CancelRequest{}
	}
}
