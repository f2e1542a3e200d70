package queue

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/berth-ci/berth/api"
)

// Handler serves the job half of berth's HTTP API:
//
//	POST /api/v1/jobs                 submit (api.JobRequest → 201 api.Job)
//	GET  /api/v1/jobs                 list (api.JobList; ?state=S, ?limit=N newest N, default 100, at most api.MaxListLimit; ?cursor=NEXT the page before)
//	GET  /api/v1/jobs/{id}            one job (api.Job)
//	GET  /api/v1/jobs/{id}/log        the log as text/plain; ?follow=1 streams until the job ends
//	POST /api/v1/jobs/{id}/cancel     cancel (api.Job)
//	POST /api/v1/jobs/prune           delete finished jobs/logs (admin; ?jobs_older_than=D&logs_older_than=D → api.PruneResult)
//
// Errors are api.Error bodies. Mount it for "/api/v1/jobs" and
// "/api/v1/jobs/", or call Register on the server's mux instead.
func (q *Queue) Handler() http.Handler {
	mux := http.NewServeMux()
	q.Register(mux)
	return mux
}

// Register adds the routes Handler serves to mux, which must not already
// have patterns for /api/v1/jobs.
func (q *Queue) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/jobs", q.handleSubmit)
	mux.HandleFunc("GET /api/v1/jobs", q.handleList)
	mux.HandleFunc("GET /api/v1/jobs/{id}", q.handleGet)
	mux.HandleFunc("GET /api/v1/jobs/{id}/log", q.handleLog)
	mux.HandleFunc("POST /api/v1/jobs/{id}/cancel", q.handleCancel)
	mux.HandleFunc("POST /api/v1/jobs/prune", q.handlePrune)
	mux.HandleFunc("GET /api/v1/jobs/quarantined", q.handleQuarantined)
	// Without these, ServeMux answers a wrong method or path in plain text;
	// the API promises JSON errors everywhere.
	mux.HandleFunc("/api/v1/jobs", methodNotAllowed("GET, POST"))
	mux.HandleFunc("/api/v1/jobs/{id}", methodNotAllowed("GET"))
	mux.HandleFunc("/api/v1/jobs/{id}/log", methodNotAllowed("GET"))
	mux.HandleFunc("/api/v1/jobs/{id}/cancel", methodNotAllowed("POST"))
	mux.HandleFunc("/api/v1/jobs/", func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %s: job endpoints are /api/v1/jobs, /api/v1/jobs/ID, /api/v1/jobs/ID/log and /api/v1/jobs/ID/cancel", r.URL.Path))
	})
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		api.WriteError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s: use %s", r.Method, r.URL.Path, allow))
	}
}

func (q *Queue) handleSubmit(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, api.MaxRequestBytes)
	req, spec, err := DecodeJobRequest(r.Body)
	if err != nil {
		q.writeError(w, err)
		return
	}
	job, again, err := q.submit(api.PrincipalFrom(r.Context()), req, spec, r.Header.Get(IdempotencyHeader))
	if err != nil {
		q.writeError(w, err)
		return
	}
	w.Header().Set("Location", "/api/v1/jobs/"+job.ID)
	status := http.StatusCreated
	if again {
		status = http.StatusOK // the key's submit applied before: this is its job
	}
	api.WriteJSON(w, status, job)
}

// defaultListLimit is the page size without ?limit.
const defaultListLimit = 100

// handleList streams one page of the caller's jobs, oldest first, with
// the cursor of the page before it.
func (q *Queue) handleList(w http.ResponseWriter, r *http.Request) {
	lp, err := api.ListQuery(r, defaultListLimit)
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	entries, more, err := q.Page(api.PrincipalFrom(r.Context()), lp.State, lp.Limit, lp.Cursor)
	if errors.Is(err, ErrBadCursor) {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err != nil {
		q.writeError(w, err)
		return
	}
	next := ""
	if more {
		next = entries[len(entries)-1].ID
	}
	slices.Reverse(entries)
	q.streamPage(w, q.Load(entries), next)
}

// streamPage writes the jobs l loads as a JobList body.
func (q *Queue) streamPage(w http.ResponseWriter, l *Loader, next string) {
	s := api.StartJobList(w)
	for {
		j, ok, err := l.Next()
		if err != nil {
			q.log.Warn("job list cut short", "err", err)
			s.Abort()
		}
		if !ok {
			break
		}
		if s.Add(j) != nil {
			return
		}
	}
	s.End(next)
}

func (q *Queue) handleGet(w http.ResponseWriter, r *http.Request) {
	job, err := q.Get(r.PathValue("id"))
	if err == nil && !api.PrincipalFrom(r.Context()).Owns(job.Owner) {
		err = fmt.Errorf("job %q: %w", job.ID, ErrNotFound)
	}
	if err != nil {
		q.writeError(w, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, job)
}

func (q *Queue) handleCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rec, err := q.get(id)
	if err == nil {
		err = q.visibleTo(api.PrincipalFrom(r.Context()), rec, id)
	}
	if err != nil {
		q.writeError(w, err)
		return
	}
	job, err := q.Cancel(id)
	if err != nil {
		q.writeError(w, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, job)
}

// followPoll bounds how long a follower sleeps between looks at the log even
// without a wake-up, as a guard against a missed notification.
const followPoll = 5 * time.Second

func (q *Queue) handleLog(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rec, err := q.get(id)
	if err == nil {
		err = q.visibleTo(api.PrincipalFrom(r.Context()), rec, id)
	}
	if err != nil {
		q.writeError(w, err)
		return
	}
	rc, follow, ok := api.StartLogStream(w, r)
	if !ok {
		return
	}
	var offset int64 // how much of the log was sent
	for {
		// Take the wake-up channels before looking, so a change between the
		// look and the wait is not missed.
		stateChanged := q.changed.wait()
		var logWritten <-chan struct{}
		if j := q.liveJob(id); j != nil {
			logWritten = j.logSignal.wait()
		}
		rec, err := q.get(id)
		if err != nil {
			// Headers may be sent already; ending the stream is all we can do.
			return
		}
		// Done is read before copying: Finish closes the log before the
		// state turns final, so this copy then reaches the true end.
		out := &sendWriter{w: w}
		n, err := q.st.readLog(id, offset, out)
		offset += n
		if out.err != nil {
			return // the client went away
		}
		if err != nil {
			q.log.Warn("cannot read job log", "job", id, "err", err)
			if !follow && offset == 0 {
				api.WriteError(w, http.StatusInternalServerError, fmt.Sprintf("cannot read the log of job %s: %v", id, err))
			}
			return
		}
		if !follow || rec.State.Done() {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		timer := time.NewTimer(followPoll)
		select {
		case <-stateChanged:
		case <-logWritten:
		case <-timer.C:
		case <-r.Context().Done():
			timer.Stop()
			return
		case <-q.done:
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

// writeError maps queue errors onto statuses with messages that say what to do.
func (q *Queue) writeError(w http.ResponseWriter, err error) {
	var re *RequestError
	switch {
	case errors.As(err, &re):
		api.WriteError(w, re.Status, re.Message)
	case errors.Is(err, ErrNotFound):
		api.WriteError(w, http.StatusNotFound, err.Error()+": list jobs with `berth jobs`")
	case errors.Is(err, ErrFinished):
		api.WriteError(w, http.StatusConflict, err.Error())
	case errors.Is(err, ErrNoSpace):
		q.log.Error("queue is out of space", "err", err)
		api.WriteError(w, http.StatusInsufficientStorage, err.Error())
	case errors.Is(err, ErrClosed):
		api.WriteError(w, http.StatusServiceUnavailable, "berth is shutting down and takes no more requests: retry once it is back")
	default:
		q.log.Error("queue request failed", "err", err)
		api.WriteError(w, http.StatusInternalServerError, err.Error())
	}
}

// sendWriter remembers a failed write to the client, so that a client
// going away is told apart from a log that cannot be read.
type sendWriter struct {
	w   io.Writer
	err error
}

func (s *sendWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if err != nil && s.err == nil {
		s.err = err
	}
	return n, err
}
