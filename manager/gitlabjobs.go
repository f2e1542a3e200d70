package manager

import (
	"context"
	"fmt"
	"net/http"
	"sort"
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

// gitlabJobs is the manager's record of the GitLab jobs it took. The zero
// value is ready to use.
type gitlabJobs struct {
	mu   sync.Mutex
	list []*api.Job // oldest first
}

// track wraps a job taken from a GitLab source so that its life is recorded.
func (g *gitlabJobs) track(job jobsource.Job, now time.Time) jobsource.Job {
	spec := job.Spec()
	j := &api.Job{ID: gitlabJobPrefix + job.ID(), Source: "gitlab", ExternalID: job.ID(),
		State: api.JobQueued, Script: cut(spec.Script, 200), CreatedAt: now.UTC()}
	if spec.Timeout > 0 {
		j.Timeout = spec.Timeout.String()
	}
	g.mu.Lock()
	g.list = append(g.list, j)
	if len(g.list) > gitlabJobsKept {
		g.list = append(g.list[:0], g.list[len(g.list)-gitlabJobsKept:]...)
	}
	g.mu.Unlock()
	return &trackedJob{Job: job, g: g, rec: j}
}

func cut(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "") + "..."
	}
	return s
}

// jobs returns copies of the recorded jobs in state (all when empty).
func (g *gitlabJobs) jobs(state api.JobState) []api.Job {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []api.Job
	for _, j := range g.list {
		if state == "" || j.State == state {
			out = append(out, *j)
		}
	}
	return out
}

// get returns the recorded job with API ID id.
func (g *gitlabJobs) get(id string) (api.Job, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := len(g.list) - 1; i >= 0; i-- {
		if g.list[i].ID == id {
			return *g.list[i], true
		}
	}
	return api.Job{}, false
}

// trackedJob records Started and Finish of a GitLab job.
type trackedJob struct {
	jobsource.Job
	g   *gitlabJobs
	rec *api.Job
}

// CreatedAt is when berth took the job, for the queue-wait metric.
func (t *trackedJob) CreatedAt() time.Time {
	t.g.mu.Lock()
	defer t.g.mu.Unlock()
	return t.rec.CreatedAt
}

// Started records the instance and start time.
func (t *trackedJob) Started(instance string) {
	now := time.Now().UTC()
	t.g.mu.Lock()
	t.rec.State, t.rec.Instance, t.rec.StartedAt = api.JobRunning, instance, &now
	t.g.mu.Unlock()
	t.Job.Started(instance)
}

// Finish records the result, then reports it to GitLab.
func (t *trackedJob) Finish(ctx context.Context, r jobsource.Result) error {
	now := time.Now().UTC()
	t.g.mu.Lock()
	t.rec.FinishedAt = &now
	if r.Instance != "" {
		t.rec.Instance = r.Instance
	}
	switch r.Failure {
	case "":
		t.rec.State = api.JobSuccess
	case jobsource.FailureCanceled:
		t.rec.State = api.JobCanceled
	default:
		t.rec.State = api.JobFailed
	}
	t.rec.Failure, t.rec.Reason = string(r.Failure), r.Message
	if r.ExitCode >= 0 && r.Failure != jobsource.FailureSystem && r.Failure != jobsource.FailureTimeout && r.Failure != jobsource.FailureCanceled {
		code := r.ExitCode
		t.rec.ExitCode = &code
	}
	t.rec.EnvKey = r.EnvKey
	t.g.mu.Unlock()
	return t.Job.Finish(ctx, r)
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

// serveJobList is GET /api/v1/jobs for the admin: the queue's jobs and the
// GitLab jobs, oldest first, filtered by ?state and cut to the newest ?limit.
func (m *Manager) serveJobList(w http.ResponseWriter, r *http.Request) {
	state, limit, err := api.ListQuery(r, 100)
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	jobs, err := m.queue.ListFor(api.PrincipalFrom(r.Context()), state, limit)
	if err != nil {
		api.WriteError(w, http.StatusServiceUnavailable, fmt.Sprintf("list jobs: %v", err))
		return
	}
	for i := range jobs {
		if jobs[i].Source == "" {
			jobs[i].Source = "queue"
		}
	}
	jobs = append(jobs, m.glJobs.jobs(state)...)
	sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].CreatedAt.Before(jobs[b].CreatedAt) })
	if limit > 0 && len(jobs) > limit {
		jobs = jobs[len(jobs)-limit:]
	}
	api.WriteJSON(w, http.StatusOK, api.JobList{Jobs: jobs})
}
