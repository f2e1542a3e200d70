// Package jobsource defines where jobs come from: the built-in queue
// (jobsource/queue) or GitLab's runner API (jobsource/gitlab).
//
// The manager asks a Source for a job only while it holds a booked slot
// (docs/failures.md, failure 1): Request is never called speculatively.
package jobsource

import (
	"context"
	"io"
	"time"
)

// Source hands out jobs.
type Source interface {
	// Name identifies the source in logs and metrics, e.g. "queue" or "gitlab:https://gitlab.example.com".
	Name() string
	// Request asks for one job. The caller holds a booked slot for it. It
	// returns (nil, nil) when there is no job; the caller then gives the
	// booking back. It may block (long-poll) until ctx is done.
	Request(ctx context.Context) (Job, error)
}

// FailureKind classifies why a job failed, so sources can map it to their own vocabulary.
type FailureKind string

// Failure kinds.
const (
	// FailureNone: the job succeeded.
	FailureNone FailureKind = ""
	// FailureScript: the script exited non-zero.
	FailureScript FailureKind = "script_failure"
	// FailureSystem: the instance, the provider or berth itself failed.
	FailureSystem FailureKind = "system_failure"
	// FailureTimeout: the job ran past its timeout.
	FailureTimeout FailureKind = "timeout"
	// FailureCanceled: the job was canceled.
	FailureCanceled FailureKind = "canceled"
	// FailureImagePull: the job's image could not be pulled (missing,
	// unauthorised, disallowed, corrupt, no linux/amd64).
	FailureImagePull FailureKind = "image_pull_failure"
)

// Spec is what to run.
type Spec struct {
	// Script is a shell script run with sh -e semantics left to the script itself.
	Script string
	// AfterScript runs after Script whatever its result, and also on a
	// graceful cancel; not after the job's timeout, which bounds it too.
	AfterScript string
	// AfterScriptTimeout bounds AfterScript; 0 means the manager's
	// default (5 minutes, gitlab-runner's).
	AfterScriptTimeout time.Duration
	// Env holds environment variables as KEY=VALUE.
	Env []string
	// Timeout bounds the job; 0 means the manager's default.
	Timeout time.Duration
	// Suspend asks to park the job's environment when it ends.
	Suspend bool
	// ResumeKey, when set, runs the job on that suspended environment.
	ResumeKey string
	// Image, when set, is the job's root file system (see Image).
	Image *Image
	// Services are sibling containers started before the script.
	Services []Service
}

// Result is how a job ended.
type Result struct {
	// ExitCode of the script; -1 when it did not run to an exit.
	ExitCode int
	// Failure is FailureNone on success.
	Failure FailureKind
	// Message explains a failure in words a user can act on.
	Message string
	// EnvKey is the key of the parked environment when Spec.Suspend was set.
	EnvKey string
	// Instance is the ID of the instance the job ran on.
	Instance string
}

// Job is one job taken from a source.
type Job interface {
	// ID identifies the job within its source.
	ID() string
	// Spec returns what to run.
	Spec() Spec
	// Log receives the job's output as it is produced.
	Log() io.Writer
	// Canceled is closed when the source cancels the job. Graceful reports
	// whether after_script should still run.
	Canceled() <-chan CancelRequest
	// Started is called once the job has an instance.
	Started(instance string)
	// Finish reports the result to the source and flushes the log.
	Finish(ctx context.Context, r Result) error
}

// CancelWatcher is implemented by jobs that run a function when they are
// canceled, so that berth does not keep a goroutine per running job
// waiting on Canceled.
type CancelWatcher interface {
	// AfterCancel arranges for f to run in its own goroutine when the job
	// is canceled (at once if it was), as context.AfterFunc does. stop
	// unregisters f and reports whether that kept f from running.
	AfterCancel(f func(CancelRequest)) (stop func() bool)
}

// CancelRequest tells a running job to stop.
type CancelRequest struct {
	// Graceful asks for after_script to run before the job ends.
	Graceful bool
}

// Waiter is implemented by sources that know when jobs are pending, such as
// the built-in queue. The manager waits on it before booking a slot, so that
// an empty queue never causes a booking (and, in on-demand mode, an instance).
type Waiter interface {
	// WaitForJobs blocks until at least one job may be pending or ctx is done.
	WaitForJobs(ctx context.Context) error
}

// BatchRequester is implemented by sources that can hand out several jobs
// in one step, such as the built-in queue (one commit for the lot). The
// caller holds one booked slot per job it asks for and gives back the
// bookings of the jobs it did not get.
type BatchRequester interface {
	// RequestBatch takes up to n jobs that need a new booking each (no job
	// that resumes an environment). It never blocks; it returns no job
	// when none is ready to take this way.
	RequestBatch(ctx context.Context, n int) ([]Job, error)
}

// Resumer is implemented by sources that can hand out, without a new
// booking, a job that resumes a parked environment: that environment's own
// slot serves it. The manager asks a Resumer before it books a slot, so that
// parked environments holding every instance cannot block their own resumes.
type Resumer interface {
	// RequestResume takes the oldest queued job whose resume key satisfies
	// runnable, or returns (nil, nil).
	RequestResume(ctx context.Context, runnable func(envKey string) bool) (Job, error)
	// Changed is closed at the next change of the source's jobs.
	Changed() <-chan struct{}
}
