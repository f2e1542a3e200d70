package gcpfake

import (
	"fmt"
	"net/http"
)

// FailWithServerError makes the next n calls of method (e.g.
// "instances.get"; any method when "") fail with the HTTP server error
// status (500, 502, 503 or 504), as Compute Engine does in a burst of its
// own failures. Google's error envelope then carries reason backendError
// and the status of the mapping in
// https://cloud.google.com/apis/design/errors#handling_errors (500
// INTERNAL, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED); Google documents 5xx
// as to be retried with exponential backoff
// (https://cloud.google.com/compute/docs/api/how-tos/api-requests-responses#handling_api_errors).
// Unlike Throttle, nothing in it names a rate or a quota.
func (c *Cloud) FailWithServerError(method string, n, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing == nil {
		c.failing = map[string][]int{}
	}
	for range n {
		c.failing[method] = append(c.failing[method], status)
	}
}

// serverErrorLocked takes the next injected server error for method, or
// returns nil.
func (c *Cloud) serverErrorLocked(method string) *apiError {
	for _, k := range []string{method, ""} {
		if q := c.failing[k]; len(q) > 0 {
			c.failing[k] = q[1:]
			msg := "Internal error. Please try again or contact Google Support."
			if q[0] != http.StatusInternalServerError {
				msg = fmt.Sprintf("The service is currently unavailable (%d). Please try again.", q[0])
			}
			return &apiError{q[0], "backendError", msg}
		}
	}
	return nil
}
