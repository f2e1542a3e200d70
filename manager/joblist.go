package manager

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource/queue"
)

// serveJobList is GET /api/v1/jobs for the admin: one page of the queue's
// jobs and the GitLab jobs merged, the newest ?limit (at most
// api.MaxListLimit) before ?cursor, oldest first, streamed job by job.
//
// The page takes the newest jobs of each source and merges them by
// creation time, so what it took of each is the newest part of that
// source: the cursor holds, per source, the last job taken ("" none yet,
// "-" none left), and the next page starts below each.
func (m *Manager) serveJobList(w http.ResponseWriter, r *http.Request) {
	lp, err := api.ListQuery(r, 100)
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	qPos, gPos, ok := parseMergedCursor(lp.Cursor)
	if !ok {
		api.WriteError(w, http.StatusBadRequest, fmt.Sprintf("cursor %q: %v", lp.Cursor, queue.ErrBadCursor))
		return
	}
	var (
		qs           []queue.PageEntry
		qMore, gMore bool
		gl           []api.Job
	)
	if qPos != cursorEnd {
		qs, qMore, err = m.queue.Page(api.PrincipalFrom(r.Context()), lp.State, lp.Limit, qPos)
		if errors.Is(err, queue.ErrBadCursor) {
			api.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		if err != nil {
			api.WriteError(w, http.StatusServiceUnavailable, fmt.Sprintf("list jobs: %v", err))
			return
		}
	}
	if gPos != cursorEnd {
		gl, gMore = m.glJobs.page(lp.State, lp.Limit, gPos)
	}
	// Newest first: take from whichever source's next job is newer.
	nq, ng := 0, 0
	for nq+ng < lp.Limit && (nq < len(qs) || ng < len(gl)) {
		if ng == len(gl) || (nq < len(qs) && !qs[nq].CreatedAt.Before(gl[ng].CreatedAt)) {
			nq++
		} else {
			ng++
		}
	}
	qNext, gNext := qPos, gPos
	if nq > 0 {
		qNext = qs[nq-1].ID
	}
	if ng > 0 {
		gNext = gl[ng-1].ID
	}
	if nq == len(qs) && !qMore {
		qNext = cursorEnd
	}
	if ng == len(gl) && !gMore {
		gNext = cursorEnd
	}
	next := ""
	if qNext != cursorEnd || gNext != cursorEnd {
		next = qNext + cursorSep + gNext
	}

	// Oldest first, loading the queue's jobs a chunk at a time.
	qs, gl = qs[:nq], gl[:ng]
	slices.Reverse(qs)
	slices.Reverse(gl)
	load := m.queue.Load(qs)
	s := api.StartJobList(w)
	var qj api.Job
	haveQ := false
	for {
		if !haveQ {
			j, ok, err := load.Next()
			if err != nil {
				m.log.Warn("job list cut short", "err", err)
				s.Abort()
			}
			qj, haveQ = j, ok
			if qj.Source == "" {
				qj.Source = "queue"
			}
		}
		var j api.Job
		switch {
		case haveQ && (len(gl) == 0 || qj.CreatedAt.Before(gl[0].CreatedAt)):
			j, haveQ = qj, false
		case len(gl) > 0:
			j, gl = gl[0], gl[1:]
		default:
			s.End(next)
			return
		}
		if s.Add(j) != nil {
			return
		}
	}
}

// cursorSep parts the queue's and GitLab's positions in a merged cursor;
// cursorEnd is the position of a source with nothing older left.
const (
	cursorSep = "~"
	cursorEnd = "-"
)

// parseMergedCursor reads a cursor serveJobList gave ("" for the
// newest).
func parseMergedCursor(c string) (qPos, gPos string, ok bool) {
	if c == "" {
		return "", "", true
	}
	qPos, gPos, ok = strings.Cut(c, cursorSep)
	if !ok || (gPos != cursorEnd && gPos != "" && !strings.HasPrefix(gPos, gitlabJobPrefix)) {
		return "", "", false
	}
	return qPos, gPos, true
}
