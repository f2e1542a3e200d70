package manager

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
)

// One job list (issue 17): `berth jobs` and GET /api/v1/jobs show the jobs
// berth took from GitLab beside the built-in queue's. GitLab keeps their
// record; berth keeps the most recent ones in memory, with the state,
// instance and timings it saw, under the ID "gitlab-<GitLab job id>".

// gitlabJobsKept bounds the GitLab jobs remembered for the list.
const gitlabJobsKept = 1000

// gitlabJobPrefix starts the API ID of a GitLab job.
const gitlabJobPrefix = "gitlab-"

// gitlabLogKept is how much of a finished GitLab job's log berth keeps
// (its end, where a failure shows): with gitlabJobsKept jobs, at most
// 32 MiB. GitLab keeps the whole log.
const gitlabLogKept = 32 << 10

// gitlabScriptKept bounds the script shown for a GitLab job.
const gitlabScriptKept = 4 << 10

// gitlabJobs is the manager's record of the GitLab jobs it took. The zero
// value is ready to use.
type gitlabJobs struct {
	mu   sync.Mutex
	list []*gitlabRecord // oldest first
}

// gitlabRecord is one GitLab job as berth saw it.
type gitlabRecord struct {
	job api.Job
	// live reads the log while the job runs; nil once it ended, when
	// tail holds the log's last gitlabLogKept bytes.
	live    gitlabLog
	tail    []byte
	dropped int    // bytes of the log before tail
	webURL  string // the job's page in GitLab
}

// gitlabLog is what a GitLab job offers of itself to `berth jobs` and
// `berth logs` (gitlab.Job).
type gitlabLog interface {
	UserScript() (script, afterScript string)
	LogSince(offset int) ([]byte, bool)
	WebURL() string
}

// track wraps a job taken from a GitLab source so that its life is recorded.
func (g *gitlabJobs) track(job jobsource.Job, now time.Time) jobsource.Job {
	spec := job.Spec()
	r := &gitlabRecord{job: api.Job{ID: gitlabJobPrefix + job.ID(), Source: "gitlab", ExternalID: job.ID(),
		State: api.JobQueued, Script: cut(spec.Script, 200), CreatedAt: now.UTC()}}
	if gl, ok := job.(gitlabLog); ok {
		// The job's own script, not the wrapper that runs it on the instance.
		script, after := gl.UserScript()
		r.job.Script, r.job.AfterScript = cut(script, gitlabScriptKept), cut(after, gitlabScriptKept)
		r.live, r.webURL = gl, gl.WebURL()
	}
	if spec.Timeout > 0 {
		r.job.Timeout = spec.Timeout.String()
	}
	g.mu.Lock()
	g.list = append(g.list, r)
	if len(g.list) > gitlabJobsKept {
		g.list = append(g.list[:0], g.list[len(g.list)-gitlabJobsKept:]...)
	}
	g.mu.Unlock()
	return &trackedJob{Job: job, g: g, rec: r}
}

func cut(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "..."
	}
	return s
}

// page returns up to limit jobs in state ("" for any) taken before the
// job with API ID before ("" for the newest), newest first, and whether
// older ones remain. A before no longer kept (dropped from the ring) has
// nothing older left either.
func (g *gitlabJobs) page(state api.JobState, limit int, before string) ([]api.Job, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := len(g.list) - 1
	if before != "" {
		for i >= 0 && g.list[i].job.ID != before {
			i--
		}
		i-- // the cursor's own job was on the previous page
	}
	var out []api.Job
	for ; i >= 0; i-- {
		if r := g.list[i]; state == "" || r.job.State == state {
			if len(out) == limit {
				return out, true
			}
			out = append(out, r.job)
		}
	}
	return out, false
}

// get returns the recorded job with API ID id.
func (g *gitlabJobs) get(id string) (api.Job, bool) {
	r := g.record(id)
	if r == nil {
		return api.Job{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return r.job, true
}

// record returns the record of the job with API ID id, or nil.
func (g *gitlabJobs) record(id string) *gitlabRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := len(g.list) - 1; i >= 0; i-- {
		if g.list[i].job.ID == id {
			return g.list[i]
		}
	}
	return nil
}

// logSince returns r's log from offset on, whether it is complete, and
// where the log berth holds starts: a finished job keeps only its tail,
// so an offset before start reads from start.
func (g *gitlabJobs) logSince(r *gitlabRecord, offset int) (b []byte, done bool, start int) {
	g.mu.Lock()
	live, tail, dropped, state := r.live, r.tail, r.dropped, r.job.State
	g.mu.Unlock()
	if live != nil {
		b, closed := live.LogSince(offset)
		return b, closed && state.Done(), 0
	}
	from := max(offset, dropped)
	return tail[min(from-dropped, len(tail)):], true, dropped
}

// trackedJob records Started and Finish of a GitLab job.
type trackedJob struct {
	jobsource.Job
	g   *gitlabJobs
	rec *gitlabRecord
}

// CreatedAt is when berth took the job, for the queue-wait metric.
func (t *trackedJob) CreatedAt() time.Time {
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	return t.rec.job.CreatedAt
}

// Started records the instance and start time.
func (t *trackedJob) Started(instance string) {
	now := time.Now().UTC()
	t.g.mu.Lock()
	t.rec.job.State, t.rec.job.Instance, t.rec.job.StartedAt = api.JobRunning, instance, &now
	t.g.mu.Unlock()
	t.Job.Started(instance)
}

// Finish records the result, reports it to GitLab, then keeps the log's
// tail (the log is complete once GitLab has the result).
func (t *trackedJob) Finish(ctx context.Context, r jobsource.Result) error {
	now := time.Now().UTC()
	t.g.mu.Lock()
	rec := &t.rec.job
	rec.FinishedAt = &now
	if r.Instance != "" {
		rec.Instance = r.Instance
	}
	switch r.Failure {
	case "":
		rec.State = api.JobSuccess
	case jobsource.FailureCanceled:
		rec.State = api.JobCanceled
	default:
		rec.State = api.JobFailed
	}
	rec.Failure, rec.Reason = string(r.Failure), r.Message
	if r.ExitCode >= 0 && r.Failure != jobsource.FailureSystem && r.Failure != jobsource.FailureTimeout && r.Failure != jobsource.FailureCanceled {
		code := r.ExitCode
		rec.ExitCode = &code
	}
	rec.EnvKey = r.EnvKey
	live := t.rec.live
	t.g.mu.Unlock()
	err := t.Job.Finish(ctx, r)
	if live != nil {
		b, _ := live.LogSince(0)
		tail := bytes.Clone(b[max(0, len(b)-gitlabLogKept):])
		t.g.mu.Lock()
		t.rec.live, t.rec.tail, t.rec.dropped = nil, tail, len(b)-len(tail)
		t.g.mu.Unlock()
	}
	return err
}

// withGitLabJobs serves GET /api/v1/jobs with the GitLab jobs merged into
// the queue's list, and GET /api/v1/jobs/gitlab-N for one of them; every
// other request goes to next. GitLab jobs have no submitter: only the admin
// token sees them.
func (m *Manager) withGitLabJobs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := api.PrincipalFrom(r.Context())
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v1/jobs" && p.Admin:
			m.serveJobList(w, r)
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/jobs/"+gitlabJobPrefix) &&
			strings.HasSuffix(r.URL.Path, "/log") && strings.Count(strings.TrimPrefix(r.URL.Path, "/api/v1/jobs/"), "/") == 1:
			m.serveGitLabLog(w, r, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/jobs/"), "/log"))
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/jobs/"+gitlabJobPrefix) &&
			!strings.Contains(strings.TrimPrefix(r.URL.Path, "/api/v1/jobs/"), "/"):
			id := strings.TrimPrefix(r.URL.Path, "/api/v1/jobs/")
			j, ok := m.glJobs.get(id)
			if !ok || !p.Admin {
				api.WriteError(w, http.StatusNotFound, fmt.Sprintf("no GitLab job %s among the last %d berth took; GitLab keeps every job's record", id, gitlabJobsKept))
				return
			}
			api.WriteJSON(w, http.StatusOK, j)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// gitlabLogPoll is how often a followed GitLab job's log is looked at.
const gitlabLogPoll = 250 * time.Millisecond

// serveGitLabLog is GET /api/v1/jobs/gitlab-N/log[?follow=1]: the log as
// GitLab receives it (masked), whole while the job runs, its last
// gitlabLogKept bytes once it ended; GitLab keeps the whole log.
func (m *Manager) serveGitLabLog(w http.ResponseWriter, r *http.Request, id string) {
	rec := m.glJobs.record(id)
	if rec == nil || !api.PrincipalFrom(r.Context()).Admin {
		api.WriteError(w, http.StatusNotFound, fmt.Sprintf("no GitLab job %s among the last %d berth took; GitLab keeps every job's log", id, gitlabJobsKept))
		return
	}
	rc, follow, ok := api.StartLogStream(w, r)
	if !ok {
		return
	}
	offset := 0
	for {
		b, done, start := m.glJobs.logSince(rec, offset)
		if offset < start {
			where := "in GitLab"
			if rec.webURL != "" {
				where = "at " + rec.webURL
			}
			fmt.Fprintf(w, "[berth keeps the last %d KiB of a finished GitLab job's log; %d bytes before them are %s]\n", gitlabLogKept>>10, start-offset, where)
			offset = start
		}
		if _, err := w.Write(b); err != nil {
			return
		}
		offset += len(b)
		if !follow || done {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(gitlabLogPoll):
		}
	}
}
