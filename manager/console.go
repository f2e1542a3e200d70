package manager

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/console"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/jobsource/queue"
	"github.com/berth-ci/berth/scaler"
)

// This file wires the web console (package console) into the manager: it
// is mounted at /ui/ on the API's listener behind the same guard (Host
// check, canonical paths), and it is fed the core's decisions and the job
// loop's job starts and ends.

// isConsolePath reports whether the console, not the bearer token,
// authenticates a request: the console has its own sign-in (a session
// cookie and CSRF tokens), since a browser cannot send a bearer token.
func isConsolePath(p string) bool { return p == "/ui" || strings.HasPrefix(p, "/ui/") }

// setupConsole creates the console once the fleet and the queue exist.
func (m *Manager) setupConsole() {
	jobAPI := http.NewServeMux()
	m.queue.Register(jobAPI)
	m.console = console.New(console.Options{
		Authenticate: m.auth.authenticate,
		Fleet:        liveFleet{m},
		Jobs:         m.queue,
		JobAPI:       jobAPI,
		Health:       m.consoleHealth,
		EnvOwner:     m.queue.EnvOwner,
		Logger:       m.log,
	})
	// The newest jobs' waits, so the waits chart survives a restart.
	if jobs, err := m.queue.List("", backfillJobs); err == nil {
		m.console.History().Backfill(time.Now(), jobs)
	}
}

// backfillJobs bounds the jobs read at start for the waits chart: a
// week of a busy CI, read in well under a second.
const backfillJobs = 50000

// mountConsole adds the console's routes to the API's mux.
func (m *Manager) mountConsole(mux *http.ServeMux) {
	if m.console == nil {
		return
	}
	mux.Handle("/ui", m.console.Handler())
	mux.Handle("/ui/", m.console.Handler())
}

// observe sees every action of the core: the metrics count them, the
// console records decisions and deleted instances.
func (m *Manager) observe(a scaler.Action) {
	m.metrics.Observe(a)
	if m.console != nil {
		m.console.History().Observe(time.Now(), a)
	}
}

// consoleJobStarted tells the console a job started on instance.
func (m *Manager) consoleJobStarted(job jobsource.Job, instance string) {
	if m.console == nil {
		return
	}
	ref, wait := m.jobRef(job), time.Duration(-1)
	if w, ok := job.(interface{ CreatedAt() time.Time }); ok {
		wait = time.Since(w.CreatedAt())
	}
	m.console.History().JobStarted(time.Now(), ref, instance, wait)
}

// consoleJobFinished tells the console a job ended with r.
func (m *Manager) consoleJobFinished(job jobsource.Job, r jobsource.Result) {
	if m.console == nil {
		return
	}
	state := "success"
	if r.Failure != "" {
		state = "failed"
	}
	m.console.History().JobFinished(m.jobRef(job), time.Now(), state, r.Message)
}

func (m *Manager) jobRef(job jobsource.Job) console.JobRef {
	if _, ok := job.(*queue.Job); ok {
		ref := console.JobRef{Source: "queue", ID: job.ID()}
		if j, err := m.queue.Get(job.ID()); err == nil {
			ref.Owner = j.Owner
		}
		return ref
	}
	return console.JobRef{Source: "gitlab", ID: job.ID()}
}

// consoleHealth is /healthz's body with the state directory's free disk
// and the queue's length.
func (m *Manager) consoleHealth() any {
	rec := &bodyRecorder{header: http.Header{}}
	m.serveHealth(rec, nil)
	out := map[string]any{"healthz": rec.json()}
	if n, err := m.queue.Len(); err == nil {
		out["queued_jobs"] = n
	}
	var st unix.Statfs_t
	if err := unix.Statfs(m.cfg.StateDir, &st); err == nil {
		free := float64(st.Bavail) * float64(st.Bsize)
		total := float64(st.Blocks) * float64(st.Bsize)
		out["state_dir"] = map[string]any{"path": m.cfg.StateDir, "free_gb": float64(int64(free/1e7)) / 100,
			"free_percent": float64(int64(free/total*1000)) / 10}
	}
	return out
}

// bodyRecorder keeps what a handler writes, to reuse serveHealth.
type bodyRecorder struct {
	header http.Header
	body   []byte
}

func (b *bodyRecorder) Header() http.Header { return b.header }
func (b *bodyRecorder) WriteHeader(int)     {}
func (b *bodyRecorder) Write(p []byte) (int, error) {
	b.body = append(b.body, p...)
	return len(p), nil
}

func (b *bodyRecorder) json() any {
	var v any
	if err := json.Unmarshal(b.body, &v); err != nil {
		return string(b.body)
	}
	return v
}

// liveFleet is the fleet of the current term for the console; empty while
// this manager stands by (a standby forwards /ui/ to the leader anyway).
type liveFleet struct{ m *Manager }

func (l liveFleet) Instances() []scaler.InstanceView {
	if f := l.m.live.Load(); f != nil {
		return f.Instances()
	}
	return nil
}

func (l liveFleet) Counts() scaler.Counts { return l.m.counts() }
