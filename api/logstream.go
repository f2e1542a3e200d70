package api

import (
	"fmt"
	"net/http"
	"time"
)

// StartLogStream begins the answer to GET /api/v1/jobs/{id}/log, which the
// built-in queue and the manager's GitLab jobs both serve: it reads
// ?follow, answers 400 for a value it does not know (ok false), and sets
// the headers of a plain-text log. A followed log has no write deadline: a
// job may run for hours, and the server's write timeout is meant for
// ordinary requests. Flush through rc between the pieces of a stream.
func StartLogStream(w http.ResponseWriter, r *http.Request) (rc *http.ResponseController, follow, ok bool) {
	switch v := r.URL.Query().Get("follow"); v {
	case "", "0", "false":
	case "1", "true":
		follow = true
	default:
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("follow=%q: use follow=1 to stream or leave it out", v))
		return nil, false, false
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	rc = http.NewResponseController(w)
	if follow {
		_ = rc.SetWriteDeadline(time.Time{})
	}
	return rc, follow, true
}
