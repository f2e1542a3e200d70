// Package gitlabfake is a fake GitLab that speaks the runner API v4 the way
// GitLab serves it (lib/api/ci/runner.rb in gitlab-org/gitlab) to GitLab
// Runner, for tests of berth's GitLab job source and of the manager end to
// end.
//
// It is faithful where a runner can tell the difference: status codes,
// headers (X-GitLab-Last-Update, Range, Job-Status,
// X-GitLab-Trace-Update-Interval), long-polling keyed on last_update, trace
// offsets, checksum checks on the final update (412), and 202 before 200 on
// finish. Every way GitLab can refuse a runner can be injected with a knob.
// It is stricter than GitLab in two places, to catch runner bugs: a
// Content-Range whose end is not start+len-1 is a 400, and it never masks
// secrets itself (GitLab hides the job token server-side; here a leak shows).
package gitlabfake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultToken is the runner token the fake accepts unless Options.Token is set.
const DefaultToken = "glrt-fake-runner-token"

// DefaultFailureReasons is what the fake sends as a job's
// features.failure_reasons unless JobSpec.FailureReasons is set: the values
// GitLab's Ci::Build knows, which it also accepts in a final update.
var DefaultFailureReasons = []string{
	"unknown_failure", "script_failure", "api_failure", "stuck_or_timeout_failure",
	"runner_system_failure", "missing_dependency_failure", "runner_unsupported",
	"stale_schedule", "job_execution_timeout", "archived_failure", "unmet_prerequisites",
	"scheduler_failure", "data_integrity_failure", "forward_deployment_failure",
	"user_blocked", "project_deleted", "ci_quota_exceeded", "pipeline_loop_detected",
	"no_matching_runner", "trace_size_exceeded", "builds_disabled",
	"environment_creation_failure", "deployment_rejected",
	"failed_outdated_deployment_job", "protected_environment_failure",
	"runner_configuration_error", "runner_external_dependency_failure", "runner_interrupted",
}

// Job states, as GitLab names them.
const (
	StatePending   = "pending"
	StateRunning   = "running"
	StateCanceling = "canceling"
	StateCanceled  = "canceled"
	StateSuccess   = "success"
	StateFailed    = "failed"
)

// Endpoints, as recorded in Request.Endpoint.
const (
	EndpointVerify  = "verify"
	EndpointRequest = "request"
	EndpointTrace   = "trace"
	EndpointUpdate  = "update"
)

// Options tune the fake. The zero value is a usable default.
type Options struct {
	// Token is the runner token to accept; default DefaultToken.
	Token string
	// LongPoll is how long /jobs/request holds a poll that sent the current
	// last_update and finds no job; GitLab holds about 50 s. Default 200ms.
	LongPoll time.Duration
	// TraceUpdateInterval is sent as X-GitLab-Trace-Update-Interval
	// (seconds); default 3 like GitLab, negative to omit the header.
	TraceUpdateInterval int
	// FinishAccepts is how many 202 answers a final update gets before the
	// 200; default 1, negative for none.
	FinishAccepts int
	// MaxArtifactSize bounds an artifact upload (413 beyond); default
	// 100 MiB, GitLab's default.
	MaxArtifactSize int64
	// DigestArtifacts keeps only the size and SHA-256 of uploads over
	// 16 MiB, not their bytes: for tests that upload gigabytes.
	DigestArtifacts bool
	// TokenExpiresIn makes runner tokens expire that long after they are
	// verified or reset (token_expires_at); 0 for tokens that never do.
	TokenExpiresIn time.Duration
	// IgnoreRunnerFeatures hands out every job whatever the runner
	// advertises, as an older GitLab would (features.go).
	IgnoreRunnerFeatures bool
}

// Variable is a CI/CD variable of a job.
type Variable struct {
	Key    string
	Value  string
	Public bool
	File   bool
	Masked bool
	Raw    bool
}

// JobSpec describes a job to queue. Only Script is needed.
type JobSpec struct {
	Name        string
	Stage       string
	ProjectID   int64
	ProjectName string
	// RepoURL is the repository without credentials (file:// works); for
	// http(s) the fake embeds gitlab-ci-token:JOBTOKEN@ as GitLab does.
	RepoURL  string
	Ref      string
	Sha      string
	Refspecs []string
	Depth    int
	// Timeout is the job timeout (runner_info.timeout); default 1h.
	Timeout     time.Duration
	Script      []string
	AfterScript []string
	Variables   []Variable
	// FailureReasons is features.failure_reasons; nil means DefaultFailureReasons.
	FailureReasons []string
	// TokenMaskPrefixes is features.token_mask_prefixes: the prefixes of
	// tokens the runner masks in the trace besides glpat-.
	TokenMaskPrefixes []string
	// Artifacts, Cache and Dependencies (job IDs whose artifacts this job
	// downloads) fill the payload's artifacts, cache and dependencies;
	// Steps are extra steps after script (artifacts.go).
	Artifacts    []Artifact
	Cache        []Cache
	Dependencies []int64
	Steps        []Step
	// Hooks are hooks: (pre_get_sources_script, post_get_sources_script),
	// sent as GitLab sends them: name and script.
	Hooks []Step
	// Image is image:name (nil image when empty); Services are services:.
	Image    string
	Services []Service
	// ImagePullPolicy is image:pull_policy.
	ImagePullPolicy []string
	// ImageUser is image: docker: user (sent as executor_opts).
	ImageUser string
	// RepoObjectFormat is git_info.repo_object_format (sha256 repositories).
	RepoObjectFormat string
	// AllowGitFetch is the project's git strategy (fetch when true).
	AllowGitFetch bool
}

// Service is a services: entry.
type Service struct {
	Name, Alias         string
	Command, Entrypoint []string
	// Variables are services: variables; User is docker: user.
	Variables []Variable
	User      string
}

// Request is one recorded API call.
type Request struct {
	Endpoint     string
	Method       string
	Path         string
	JobID        int64
	Status       int
	RequestID    string
	RunnerToken  string // RUNNER-TOKEN header
	JobToken     string // JOB-TOKEN header
	ContentRange string
	Body         []byte
}

// Fake is a fake GitLab server. All methods are safe for concurrent use.
type Fake struct {
	srv  *httptest.Server
	opts Options

	mu           sync.Mutex
	jobs         map[int64]*Job
	order        []int64
	pending      []int64
	nextID       int64
	queueVersion int
	changed      chan struct{} // closed and replaced on every change
	requests     []Request
	requestFails []int
	polls        int // job requests in flight
	maxPolls     int
	// artifactFails are statuses injected into the next artifact uploads.
	artifactFails []int
	// git holds the repositories served over HTTP (git.go).
	git gitRepos
	// token is the runner token accepted now; rotations is how often it
	// was reset (token.go).
	token     string
	rotations int
}

// New starts a fake GitLab; Close it when done.
func New(opts Options) *Fake {
	if opts.Token == "" {
		opts.Token = DefaultToken
	}
	if opts.LongPoll <= 0 {
		opts.LongPoll = 200 * time.Millisecond
	}
	if opts.TraceUpdateInterval == 0 {
		opts.TraceUpdateInterval = 3
	}
	if opts.FinishAccepts == 0 {
		opts.FinishAccepts = 1
	}
	f := &Fake{
		opts:    opts,
		token:   opts.Token,
		jobs:    map[int64]*Job{},
		nextID:  1000,
		changed: make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v4/runners/verify", f.handleVerify)
	mux.HandleFunc("POST /api/v4/runners/reset_authentication_token", f.handleResetToken)
	mux.HandleFunc("POST /api/v4/jobs/request", f.handleRequest)
	mux.HandleFunc("PATCH /api/v4/jobs/{id}/trace", f.handleTrace)
	mux.HandleFunc("PUT /api/v4/jobs/{id}", f.handleUpdate)
	mux.HandleFunc("POST /api/v4/jobs/{id}/artifacts", f.handleUploadArtifacts)
	mux.HandleFunc("GET /api/v4/jobs/{id}/artifacts", f.handleDownloadArtifacts)
	mux.HandleFunc("/git/", f.handleGit)
	f.srv = httptest.NewServer(mux)
	return f
}

// URL is the fake's base URL, to use as the GitLab URL.
func (f *Fake) URL() string { return f.srv.URL }

// Token is the runner token the fake accepts now.
func (f *Fake) Token() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.token
}

// Close stops the server; long-polls in flight end.
func (f *Fake) Close() {
	f.srv.CloseClientConnections()
	f.srv.Close()
}

// notifyLocked wakes long-polls and waiters; f.mu must be held.
func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// AddJob queues a job and returns its ID.
func (f *Fake) AddJob(spec JobSpec) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	id := f.nextID
	j := &Job{f: f, id: id, spec: spec, token: "glcbt-" + randomHex(10), state: StatePending, exitCode: -1}
	f.jobs[id] = j
	f.order = append(f.order, id)
	f.pending = append(f.pending, id)
	f.queueVersion++
	f.notifyLocked()
	return id
}

// Job returns the job with id, or nil.
func (f *Fake) Job(id int64) *Job {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.jobs[id]
}

// Jobs returns every job in the order they were added.
func (f *Fake) Jobs() []*Job {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*Job, 0, len(f.order))
	for _, id := range f.order {
		out = append(out, f.jobs[id])
	}
	return out
}

// RequestCount is the number of POST /jobs/request calls received.
func (f *Fake) RequestCount() int { return f.Count(EndpointRequest, 0) }

// Count is the number of calls to endpoint answered with status (0: any status).
func (f *Fake) Count(endpoint string, status int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.requests {
		if r.Endpoint == endpoint && (status == 0 || r.Status == status) {
			n++
		}
	}
	return n
}

// Requests returns a copy of every recorded call, in order.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// FailNextRequests makes the next n POST /jobs/request answer status
// (409: another runner took the job; 503: GitLab unavailable).
func (f *Fake) FailNextRequests(status, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.requestFails = append(f.requestFails, status)
	}
}

// WaitAllDone waits until every added job has reached a final state
// (success, failed or canceled).
func (f *Fake) WaitAllDone(ctx context.Context) error {
	for {
		f.mu.Lock()
		ch := f.changed
		left := 0
		for _, j := range f.jobs {
			if !isFinal(j.state) {
				left++
			}
		}
		f.mu.Unlock()
		if left == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("gitlabfake: %d jobs not done: %w", left, ctx.Err())
		}
	}
}

func isFinal(state string) bool {
	return state == StateSuccess || state == StateFailed || state == StateCanceled
}

// record appends a call to the log; f.mu must not be held.
func (f *Fake) record(endpoint string, r *http.Request, jobID int64, status int, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, Request{
		Endpoint:     endpoint,
		Method:       r.Method,
		Path:         r.URL.Path,
		JobID:        jobID,
		Status:       status,
		RequestID:    r.Header.Get("X-Request-Id"),
		RunnerToken:  r.Header.Get("RUNNER-TOKEN"),
		JobToken:     r.Header.Get("JOB-TOKEN"),
		ContentRange: r.Header.Get("Content-Range"),
		Body:         body,
	})
}

func (f *Fake) setInterval(w http.ResponseWriter) {
	if f.opts.TraceUpdateInterval > 0 {
		w.Header().Set("X-GitLab-Trace-Update-Interval", strconv.Itoa(f.opts.TraceUpdateInterval))
	}
}

type runnerBody struct {
	Token      string          `json:"token"`
	SystemID   string          `json:"system_id"`
	LastUpdate string          `json:"last_update"`
	Info       json.RawMessage `json:"info"`
}

func (f *Fake) handleVerify(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var b runnerBody
	status := http.StatusOK
	if err := json.Unmarshal(body, &b); err != nil {
		status = http.StatusBadRequest
	} else if b.Token != f.Token() {
		status = http.StatusForbidden
	}
	f.record(EndpointVerify, r, 0, status, body)
	if status != http.StatusOK {
		http.Error(w, `{"message":"403 Forbidden"}`, status)
		return
	}
	writeJSON(w, status, map[string]any{"id": 1, "token": b.Token, "token_expires_at": f.expiresAt()})
}

// MaxConcurrentPolls is the largest number of POST /jobs/request calls
// that were in flight at the same moment.
func (f *Fake) MaxConcurrentPolls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxPolls
}

// PollsInFlight is the number of POST /jobs/request calls being answered
// or held right now.
func (f *Fake) PollsInFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polls
}

func (f *Fake) handleRequest(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.polls++
	f.maxPolls = max(f.maxPolls, f.polls)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.polls--
		f.mu.Unlock()
	}()
	body, _ := io.ReadAll(r.Body)
	var b runnerBody
	if err := json.Unmarshal(body, &b); err != nil {
		f.record(EndpointRequest, r, 0, http.StatusBadRequest, body)
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	if b.Token != f.Token() {
		f.record(EndpointRequest, r, 0, http.StatusForbidden, body)
		http.Error(w, `{"message":"403 Forbidden"}`, http.StatusForbidden)
		return
	}
	f.mu.Lock()
	if len(f.requestFails) > 0 {
		status := f.requestFails[0]
		f.requestFails = f.requestFails[1:]
		f.mu.Unlock()
		f.record(EndpointRequest, r, 0, status, body)
		w.WriteHeader(status)
		return
	}
	f.mu.Unlock()

	// Long-poll like GitLab's Workhorse: hold the poll only while the
	// runner is up to date (its last_update is the queue's current value).
	timer := time.NewTimer(f.opts.LongPoll)
	defer timer.Stop()
	for {
		f.mu.Lock()
		if len(f.pending) > 0 {
			id := f.pending[0]
			f.pending = f.pending[1:]
			j := f.jobs[id]
			if missing := j.missingFeatures(b.Info); len(missing) > 0 && !f.opts.IgnoreRunnerFeatures {
				// Dropped as GitLab's RegisterJobService does; the
				// runner is offered the next job.
				j.state, j.reportedState, j.failureReason, j.missing = StateFailed, StateFailed, ReasonRunnerUnsupported, missing
				f.queueVersion++
				f.notifyLocked()
				f.mu.Unlock()
				continue
			}
			j.state = StateRunning
			payload := j.payloadLocked(f.srv.URL)
			f.queueVersion++
			f.notifyLocked()
			f.mu.Unlock()
			f.record(EndpointRequest, r, id, http.StatusCreated, body)
			writeJSON(w, http.StatusCreated, payload)
			return
		}
		version := strconv.Itoa(f.queueVersion)
		ch := f.changed
		f.mu.Unlock()
		if b.LastUpdate != version {
			f.noJob(w, r, body, version)
			return
		}
		select {
		case <-ch:
		case <-timer.C:
			f.noJob(w, r, body, version)
			return
		case <-r.Context().Done():
			f.record(EndpointRequest, r, 0, 0, body)
			return
		}
	}
}

func (f *Fake) noJob(w http.ResponseWriter, r *http.Request, body []byte, version string) {
	f.record(EndpointRequest, r, 0, http.StatusNoContent, body)
	w.Header().Set("X-GitLab-Last-Update", version)
	w.WriteHeader(http.StatusNoContent)
}

// jobFor finds the job of a /jobs/:id call.
func (f *Fake) jobFor(r *http.Request) (*Job, int64) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return nil, 0
	}
	return f.Job(id), id
}

func (f *Fake) handleTrace(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	j, id := f.jobFor(r)
	status := f.trace(w, r, j, body)
	f.record(EndpointTrace, r, id, status, body)
}

// trace applies a PATCH /jobs/:id/trace and returns the status it answered.
func (f *Fake) trace(w http.ResponseWriter, r *http.Request, j *Job, body []byte) int {
	if j == nil {
		w.WriteHeader(http.StatusNotFound)
		return http.StatusNotFound
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Header.Get("JOB-TOKEN") != j.token || (j.state != StateRunning && j.state != StateCanceling) {
		// GitLab answers 403 "Job is not running" once a job has ended.
		w.Header().Set("Job-Status", j.state)
		w.WriteHeader(http.StatusForbidden)
		return http.StatusForbidden
	}
	f.setInterval(w)
	if len(j.traceFails) > 0 {
		status := j.traceFails[0]
		j.traceFails = j.traceFails[1:]
		w.Header().Set("Job-Status", j.state)
		w.Header().Set("Range", fmt.Sprintf("0-%d", len(j.trace)))
		w.WriteHeader(status)
		return status
	}
	cr := r.Header.Get("Content-Range")
	if cr == "" {
		http.Error(w, "missing Content-Range", http.StatusBadRequest)
		return http.StatusBadRequest
	}
	startS, endS, ok := strings.Cut(cr, "-")
	start, err1 := strconv.Atoi(startS)
	end, err2 := strconv.Atoi(endS)
	if !ok || err1 != nil || err2 != nil || end != start+len(body)-1 {
		http.Error(w, "Content-Range "+cr+" does not match a body of "+strconv.Itoa(len(body))+" bytes", http.StatusBadRequest)
		return http.StatusBadRequest
	}
	if start != len(j.trace) {
		w.Header().Set("Range", fmt.Sprintf("0-%d", len(j.trace)))
		w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
		return http.StatusRequestedRangeNotSatisfiable
	}
	if j.losePatches > 0 {
		// Acknowledge as if stored, then lose it, like a failed write
		// behind a load balancer: the next patch finds a gap.
		j.losePatches--
		w.Header().Set("Range", fmt.Sprintf("0-%d", start+len(body)))
	} else {
		j.trace = append(j.trace, body...)
		w.Header().Set("Range", fmt.Sprintf("0-%d", len(j.trace)))
	}
	w.Header().Set("Job-Status", j.state)
	w.WriteHeader(http.StatusAccepted)
	return http.StatusAccepted
}

type updateBody struct {
	Token         string `json:"token"`
	State         string `json:"state"`
	FailureReason string `json:"failure_reason"`
	ExitCode      *int   `json:"exit_code"`
	Output        struct {
		Checksum string `json:"checksum"`
		Bytesize int    `json:"bytesize"`
	} `json:"output"`
}

func (f *Fake) handleUpdate(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	j, id := f.jobFor(r)
	status := f.update(w, j, body)
	f.record(EndpointUpdate, r, id, status, body)
}

// update applies a PUT /jobs/:id and returns the status it answered.
func (f *Fake) update(w http.ResponseWriter, j *Job, body []byte) int {
	if j == nil {
		w.WriteHeader(http.StatusNotFound)
		return http.StatusNotFound
	}
	var b updateBody
	if err := json.Unmarshal(body, &b); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return http.StatusBadRequest
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if b.Token != j.token || (j.state != StateRunning && j.state != StateCanceling) {
		w.Header().Set("Job-Status", j.state)
		w.WriteHeader(http.StatusForbidden)
		return http.StatusForbidden
	}
	f.setInterval(w)
	w.Header().Set("Job-Status", j.state)
	switch b.State {
	case StateRunning:
		j.keepAlives++
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	case StateSuccess, StateFailed:
	default:
		http.Error(w, "state does not have a valid value", http.StatusBadRequest)
		return http.StatusBadRequest
	}
	if b.State == StateFailed && b.FailureReason != "" && !slices.Contains(j.failureReasons(), b.FailureReason) {
		// GitLab's API validates failure_reason against the values it knows.
		http.Error(w, "failure_reason does not have a valid value", http.StatusBadRequest)
		return http.StatusBadRequest
	}
	if j.corrupt {
		// Simulate lost live-trace chunks: GitLab's copy no longer matches.
		j.corrupt = false
		j.trace = j.trace[:len(j.trace)/2]
	}
	if b.Output.Checksum != fmt.Sprintf("crc32:%08x", crc32.ChecksumIEEE(j.trace)) || b.Output.Bytesize != len(j.trace) {
		// 412 asks the runner to reset and resend the whole log.
		j.trace = nil
		w.WriteHeader(http.StatusPreconditionFailed)
		return http.StatusPreconditionFailed
	}
	if j.accepts < f.opts.FinishAccepts {
		j.accepts++
		w.WriteHeader(http.StatusAccepted)
		return http.StatusAccepted
	}
	j.reportedState = b.State
	j.failureReason = b.FailureReason
	if b.ExitCode != nil {
		j.exitCode = *b.ExitCode
	}
	if j.state == StateCanceling {
		j.state = StateCanceled
	} else {
		j.state = b.State
	}
	j.finishLocked()
	w.Header().Set("Job-Status", j.state)
	w.WriteHeader(http.StatusOK)
	return http.StatusOK
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Job is a job of the fake, with its log and result as GitLab holds them.
type Job struct {
	f     *Fake
	id    int64
	spec  JobSpec
	token string

	// Guarded by f.mu.
	state         string
	trace         []byte
	reportedState string
	failureReason string
	exitCode      int
	accepts       int
	keepAlives    int
	traceFails    []int
	losePatches   int
	corrupt       bool
	uploads       []Uploaded
	missing       []string // features the runner lacked (runner_unsupported)
}

// ID is the job's ID.
func (j *Job) ID() int64 { return j.id }

// Token is the job token (JOB-TOKEN).
func (j *Job) Token() string { return j.token }

// State is GitLab's state of the job: pending, running, canceling,
// canceled, success or failed.
func (j *Job) State() string {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	return j.state
}

// Trace is the log GitLab holds.
func (j *Job) Trace() string {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	return string(j.trace)
}

// ReportedState is the state of the runner's accepted final update
// (success or failed), empty until then.
func (j *Job) ReportedState() string {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	return j.reportedState
}

// FailureReason is the failure_reason of the accepted final update.
func (j *Job) FailureReason() string {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	return j.failureReason
}

// ExitCode is the exit_code of the accepted final update, -1 if none.
func (j *Job) ExitCode() int {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	return j.exitCode
}

// KeepAlives counts PUT state=running calls.
func (j *Job) KeepAlives() int {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	return j.keepAlives
}

// Cancel cancels the job at once, as a user's cancel in GitLab without
// graceful cancellation: the job is canceled and every later call about it
// is answered 403.
func (j *Job) Cancel() {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	if isFinal(j.state) {
		return
	}
	j.f.pending = slices.DeleteFunc(j.f.pending, func(id int64) bool { return id == j.id })
	j.state = StateCanceled
	j.finishLocked()
}

// Canceling starts a graceful cancel: answers carry Job-Status: canceling,
// and the runner's final update makes the job canceled.
func (j *Job) Canceling() {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	if j.state == StateRunning {
		j.state = StateCanceling
		j.f.notifyLocked()
	}
}

// FailNextTrace makes the next n log updates answer status. 416 carries the
// true Range; 403 carries Job-Status; the job's state does not change.
func (j *Job) FailNextTrace(status, n int) {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	for range n {
		j.traceFails = append(j.traceFails, status)
	}
}

// LoseNextTracePatches acknowledges the next n log updates without storing
// them, so that the runner's next update gets a 416 and must resend.
func (j *Job) LoseNextTracePatches(n int) {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	j.losePatches += n
}

// CorruptTrace damages the stored log before the next final update, so its
// checksum fails: the update is answered 412 and the log must be resent.
func (j *Job) CorruptTrace() {
	j.f.mu.Lock()
	defer j.f.mu.Unlock()
	j.corrupt = true
}

func (j *Job) finishLocked() {
	j.f.notifyLocked()
}

func (j *Job) failureReasons() []string {
	if j.spec.FailureReasons != nil {
		return j.spec.FailureReasons
	}
	return DefaultFailureReasons
}

// payloadLocked is the /jobs/request answer for the job, shaped like GitLab's.
func (j *Job) payloadLocked(serverURL string) map[string]any {
	s := j.spec
	timeout := int(s.Timeout / time.Second)
	if timeout <= 0 {
		timeout = 3600
	}
	repoURL := s.RepoURL
	if u, err := url.Parse(repoURL); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		u.User = url.UserPassword("gitlab-ci-token", j.token)
		repoURL = u.String()
	}
	name := s.Name
	if name == "" {
		name = "job"
	}
	stage := s.Stage
	if stage == "" {
		stage = "test"
	}
	project := s.ProjectName
	if project == "" {
		project = "project"
	}
	ref := s.Ref
	if ref == "" {
		ref = "main"
	}
	vars := []map[string]any{
		predefined("CI", "true"),
		predefined("GITLAB_CI", "true"),
		predefined("CI_SERVER_URL", serverURL),
		predefined("CI_JOB_ID", strconv.FormatInt(j.id, 10)),
		predefined("CI_JOB_NAME", name),
		predefined("CI_JOB_STAGE", stage),
		{"key": "CI_JOB_TOKEN", "value": j.token, "public": false, "masked": true, "file": false},
		predefined("CI_PROJECT_ID", strconv.FormatInt(s.ProjectID, 10)),
		predefined("CI_PROJECT_NAME", project),
		predefined("CI_COMMIT_SHA", s.Sha),
		predefined("CI_COMMIT_REF_NAME", ref),
		{"key": "CI_REPOSITORY_URL", "value": repoURL, "public": false, "masked": false, "file": false},
	}
	vars = append(vars, j.dotenvLocked()...)
	for _, v := range s.Variables {
		vars = append(vars, map[string]any{"key": v.Key, "value": v.Value, "public": v.Public,
			"file": v.File, "masked": v.Masked, "raw": v.Raw})
	}
	steps := []map[string]any{{"name": "script", "script": nonNil(s.Script), "timeout": timeout,
		"when": "on_success", "allow_failure": false}}
	if len(s.AfterScript) > 0 {
		steps = append(steps, map[string]any{"name": "after_script", "script": s.AfterScript,
			"timeout": timeout, "when": "always", "allow_failure": true})
	}
	for _, st := range s.Steps {
		steps = append(steps, map[string]any{"name": st.Name, "script": nonNil(st.Script),
			"timeout": timeout, "when": "on_success", "allow_failure": false})
	}
	return map[string]any{
		"id":              j.id,
		"token":           j.token,
		"allow_git_fetch": s.AllowGitFetch,
		"job_info": map[string]any{"id": j.id, "name": name, "stage": stage,
			"project_id": s.ProjectID, "project_name": project},
		"git_info": map[string]any{"repo_url": repoURL, "ref": ref, "sha": s.Sha,
			"before_sha": strings.Repeat("0", 40), "ref_type": "branch",
			"refspecs": nonNil(s.Refspecs), "depth": s.Depth, "repo_object_format": s.RepoObjectFormat},
		"runner_info":  map[string]any{"timeout": timeout, "runner_session_url": nil},
		"variables":    vars,
		"steps":        steps,
		"hooks":        j.hooksPayload(),
		"image":        j.imagePayload(),
		"services":     j.servicesPayload(),
		"artifacts":    j.artifactsPayload(),
		"cache":        j.cachePayload(),
		"credentials":  []any{},
		"dependencies": j.dependenciesLocked(),
		"features": map[string]any{"trace_sections": true, "failure_reasons": j.failureReasons(),
			"token_mask_prefixes": nonNil(s.TokenMaskPrefixes)},
	}
}

func (j *Job) hooksPayload() []map[string]any {
	out := []map[string]any{}
	for _, h := range j.spec.Hooks {
		out = append(out, map[string]any{"name": h.Name, "script": nonNil(h.Script)})
	}
	return out
}

func predefined(key, value string) map[string]any {
	return map[string]any{"key": key, "value": value, "public": true, "masked": false, "file": false}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (j *Job) imagePayload() any {
	if j.spec.Image == "" {
		return nil
	}
	return map[string]any{"name": j.spec.Image, "entrypoint": nil, "pull_policy": j.spec.ImagePullPolicy,
		"executor_opts": executorOpts(j.spec.ImageUser)}
}

func (j *Job) servicesPayload() []map[string]any {
	out := []map[string]any{}
	for _, s := range j.spec.Services {
		vars := []map[string]any{}
		for _, v := range s.Variables {
			vars = append(vars, map[string]any{"key": v.Key, "value": v.Value})
		}
		out = append(out, map[string]any{"name": s.Name, "alias": s.Alias, "command": s.Command, "entrypoint": s.Entrypoint,
			"variables": vars, "executor_opts": executorOpts(s.User)})
	}
	return out
}

// executorOpts is GitLab's executor_opts of an image or service.
func executorOpts(user string) map[string]any {
	if user == "" {
		return map[string]any{}
	}
	return map[string]any{"docker": map[string]any{"user": user}}
}
