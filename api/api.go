// Package api holds the JSON types of berth's HTTP API and a client for it.
//
// The server side lives in the packages that own the data (jobsource/queue
// serves /api/v1/jobs, the manager serves /api/v1/instances); both encode
// these types so that `berth submit`, `berth jobs` and scripts using curl see
// one format. Times are RFC 3339 in UTC; absent times are omitted rather than
// sent as the zero time, so a client can tell "not started" from "started at
// year 1".
package api

import (
	"fmt"
	"net/http"
	"time"
)

// DefaultServer is where clients look for `berth run` when neither --server
// nor $BERTH_SERVER says otherwise. It matches the default `listen` setting.
const DefaultServer = "http://127.0.0.1:8765"

// ServerEnv is the environment variable that overrides DefaultServer.
const ServerEnv = "BERTH_SERVER"

// MaxRequestBytes bounds a JobRequest body. A megabyte holds any hand-written
// CI script many times over while keeping a runaway client from filling the
// server's memory or the queue database.
const MaxRequestBytes = 1 << 20

// JobState is where a job is in its life.
type JobState string

// Job states. queued and running are live; the others are final.
const (
	JobQueued   JobState = "queued"
	JobRunning  JobState = "running"
	JobSuccess  JobState = "success"
	JobFailed   JobState = "failed"
	JobCanceled JobState = "canceled"
)

// Done reports whether s is final: the job's log is complete and nothing about
// it changes any more.
func (s JobState) Done() bool {
	return s == JobSuccess || s == JobFailed || s == JobCanceled
}

// Valid reports whether s is one of the documented states.
func (s JobState) Valid() bool {
	switch s {
	case JobQueued, JobRunning, JobSuccess, JobFailed, JobCanceled:
		return true
	}
	return false
}

// JobRequest is the body of POST /api/v1/jobs.
type JobRequest struct {
	// Script is run by sh on the instance. Required.
	Script string `json:"script"`
	// AfterScript runs after Script whatever its result.
	AfterScript string `json:"after_script,omitempty"`
	// Env holds environment variables for the script. Names must be shell
	// identifiers ([A-Za-z_][A-Za-z0-9_]*). A map, not a list, so a name
	// cannot appear twice with different values.
	Env map[string]string `json:"env,omitempty"`
	// Timeout bounds the job as a Go duration ("90s", "10m", "2h"); empty
	// means the server's default.
	Timeout string `json:"timeout,omitempty"`
	// Suspend parks the job's environment when it ends; the job's EnvKey
	// then names it for a later Resume.
	Suspend bool `json:"suspend,omitempty"`
	// Resume runs the job on the parked environment with this key.
	Resume string `json:"resume,omitempty"`
	// Image, when set, is the job's root file system (see Image).
	Image *Image `json:"image,omitempty"`
	// Services are sibling containers the job reaches by alias.
	Services []Service `json:"services,omitempty"`
}

// Job is a job as the API reports it. Env values are not echoed back because
// they often hold secrets; EnvNames lists the names that were set.
type Job struct {
	// ID is the job's ID within its source (the queue numbers jobs 1, 2, ...).
	ID string `json:"id"`
	// Source is where the job came from: "queue" (berth submit) or
	// "gitlab"; ExternalID is the job's ID there (GitLab's job id).
	Source     string `json:"source,omitempty"`
	ExternalID string `json:"external_id,omitempty"`
	// Owner names the submitter (see Principal) whose token queued the
	// job; empty for the admin.
	Owner string `json:"owner,omitempty"`
	// State is where the job is in its life.
	State JobState `json:"state"`
	// Script is what the job runs (in lists, cut short; ask for the job to
	// see all of it).
	Script string `json:"script"`
	// AfterScript runs after Script whatever its result.
	AfterScript string `json:"after_script,omitempty"`
	// EnvNames lists the names of the job's env variables, sorted.
	EnvNames []string `json:"env_names,omitempty"`
	// Timeout is the job's own timeout as a Go duration; empty means the
	// server's default.
	Timeout string `json:"timeout,omitempty"`
	// Suspend and Resume echo the request.
	Suspend bool   `json:"suspend,omitempty"`
	Resume  string `json:"resume,omitempty"`
	// Image and Services echo the request.
	Image    *Image    `json:"image,omitempty"`
	Services []Service `json:"services,omitempty"`
	// CreatedAt is when the job was submitted, StartedAt when it was handed
	// to the manager, FinishedAt when it ended.
	CreatedAt  time.Time  `json:"created_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// ExitCode is set only when the script ran to an exit; a system failure
	// or a timeout leaves it nil.
	ExitCode *int `json:"exit_code,omitempty"`
	// Failure is the failure kind (script_failure, system_failure, timeout,
	// canceled); empty on success and while the job is live.
	Failure string `json:"failure,omitempty"`
	// Reason explains a failure or cancellation in words a user can act on.
	Reason string `json:"reason,omitempty"`
	// Instance is the ID of the instance the job ran on.
	Instance string `json:"instance,omitempty"`
	// EnvKey names the parked environment when the job asked to suspend.
	EnvKey string `json:"env_key,omitempty"`
	// CancelRequested is true once a cancel arrived for a running job that
	// has not stopped yet.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// WaitingFor says why a queued job has not started: one of the
	// Wait* codes (docs/semantics.md, "Why a queued job waits"); empty for
	// a job that is not queued. WaitingDetail says the same in words, with
	// the numbers behind it.
	WaitingFor    string `json:"waiting_for,omitempty"`
	WaitingDetail string `json:"waiting_detail,omitempty"`
}

// Why a queued job waits (Job.WaitingFor).
const (
	// WaitMaxInstances: every slot is in use and the fleet is at
	// max_instances; the job starts when a running job ends.
	WaitMaxInstances = "max_instances"
	// WaitNoIdleSlot: preemptive mode takes a job only onto an idle slot
	// of a ready instance, and none is free; an instance is starting.
	WaitNoIdleSlot = "no_idle_slot"
	// WaitResume: the job resumes a parked environment that another job
	// is using or resuming; it starts when that job is done with it.
	WaitResume = "resume"
	// WaitLeadership: this berth may not take jobs now (under [ha] it is
	// not, or no longer sure it is, the leader).
	WaitLeadership = "leadership"
	// WaitCapacity: the provider failed to create instances (a quota,
	// a cloud out of capacity, the group at its max_size); berth asks
	// again, and the detail names the provider's error.
	WaitCapacity = "capacity"
	// WaitThrottled: the cloud's API throttles berth's calls, so berth
	// cannot ask for instances until the cloud allows it again; the detail
	// names the provider's error and, when the cloud said, the time.
	WaitThrottled = "throttled"
	// WaitTurn: the job loop is taking jobs; this one is next or behind
	// others in the queue, in order.
	WaitTurn = "turn"
)

// QueueWait is how long the job waited between submission and start, or
// how long it has waited so far (as of now) when it has not started.
func (j Job) QueueWait(now time.Time) time.Duration {
	if j.StartedAt != nil {
		return j.StartedAt.Sub(j.CreatedAt)
	}
	if j.State == JobQueued {
		return now.Sub(j.CreatedAt)
	}
	return 0
}

// JobList is the body of GET /api/v1/jobs: one page of the newest jobs.
type JobList struct {
	// Jobs, oldest first.
	Jobs []Job `json:"jobs"`
	// Next, when not empty, lists the older jobs: pass it as ?cursor= for
	// the page before this one. Empty on the last page.
	Next string `json:"next,omitempty"`
}

// SlotCounts counts an instance's slots by slot state (see docs/semantics.md,
// Vocabulary); the fields are named after the states.
type SlotCounts struct {
	Idle        int `json:"idle"`
	Reserved    int `json:"reserved"`
	Acquired    int `json:"acquired"`
	Suspended   int `json:"suspended"`
	Unavailable int `json:"unavailable"`
}

// Total is the instance's capacity.
func (c SlotCounts) Total() int {
	return c.Idle + c.Reserved + c.Acquired + c.Suspended + c.Unavailable
}

// Instance is an instance as the API reports it.
type Instance struct {
	// ID is the provider's instance ID.
	ID string `json:"id"`
	// State is the instance's state (creating, running, suspended, ...).
	State string `json:"state"`
	// Slots counts the instance's slots by state.
	Slots SlotCounts `json:"slots"`
	// UseCount is how many jobs the instance has run.
	UseCount int `json:"use_count"`
	// CreatedAt is when berth first saw the instance; ReadyAt when it
	// became ready to take jobs.
	CreatedAt time.Time  `json:"created_at"`
	ReadyAt   *time.Time `json:"ready_at,omitempty"`
	// EnvKeys lists the parked environments the instance holds.
	EnvKeys []string `json:"env_keys,omitempty"`
	// DeleteReason says why berth is deleting or deleted the instance.
	DeleteReason string `json:"delete_reason,omitempty"`
}

// InstanceList is the body of GET /api/v1/instances. Clients also accept a
// bare JSON array.
type InstanceList struct {
	// Instances in the server's order.
	Instances []Instance `json:"instances"`
}

// Error is the body of every 4xx/5xx response. The client returns it as a
// Go error (*Error) so callers can branch on Status with errors.As.
type Error struct {
	// Message says what went wrong and what to do about it.
	Message string `json:"error"`
	// Status is the HTTP status code; not part of the body.
	Status int `json:"-"`
}

// Error returns the server's message, which is written for people.
func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("server answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return e.Message
}
