package api

import (
	"fmt"
	"net/http"
	"strconv"
)

// ListQuery reads the state filter and limit of GET /api/v1/jobs: the
// built-in queue and the manager's merged job list answer the same query.
// The error is the 400 message to send back.
func ListQuery(r *http.Request, defaultLimit int) (JobState, int, error) {
	q := r.URL.Query()
	state := JobState(q.Get("state"))
	if state != "" && !state.Valid() {
		return "", 0, fmt.Errorf("unknown state %q: use queued, running, success, failed or canceled", state)
	}
	limit := defaultLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return "", 0, fmt.Errorf("limit %q is not a count: use a number >= 0 (0 lists all jobs)", s)
		}
		limit = n
	}
	return state, limit, nil
}
