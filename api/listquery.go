package api

import (
	"fmt"
	"net/http"
	"strconv"
)

// MaxListLimit is the most jobs one page of GET /api/v1/jobs holds:
// ?limit=0 and any larger limit give this many, and the page's next
// cursor leads to the older ones (docs/config.md, "The API"). One call
// then costs berth the same memory however many jobs it keeps.
const MaxListLimit = 1000

// ListParams is a query of GET /api/v1/jobs.
type ListParams struct {
	// State keeps only the jobs in that state; "" keeps all.
	State JobState
	// Limit is the page size, 1..MaxListLimit.
	Limit int
	// Cursor is the previous page's JobList.Next: this page holds the
	// jobs listed before it (older). "" starts at the newest job.
	Cursor string
}

// ListQuery reads the state filter, page size and cursor of GET
// /api/v1/jobs: the built-in queue and the manager's merged job list
// answer the same query. The error is the 400 message to send back.
func ListQuery(r *http.Request, defaultLimit int) (ListParams, error) {
	q := r.URL.Query()
	p := ListParams{State: JobState(q.Get("state")), Limit: defaultLimit, Cursor: q.Get("cursor")}
	if p.State != "" && !p.State.Valid() {
		return ListParams{}, fmt.Errorf("unknown state %q: use queued, running, success, failed or canceled", p.State)
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return ListParams{}, fmt.Errorf("limit %q is not a count: use a number from 1 to %d (0 means %d); older jobs are on the next pages (follow \"next\" with ?cursor=)", s, MaxListLimit, MaxListLimit)
		}
		p.Limit = n
	}
	if p.Limit <= 0 || p.Limit > MaxListLimit {
		p.Limit = MaxListLimit
	}
	return p, nil
}
