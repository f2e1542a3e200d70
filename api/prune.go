package api

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// PruneResult is the answer to POST /api/v1/jobs/prune.
type PruneResult struct {
	// Jobs is how many finished jobs were deleted, with their logs.
	Jobs int `json:"jobs_deleted"`
	// Logs is how many logs of finished jobs that are kept were deleted.
	Logs int `json:"logs_deleted"`
}

// Prune deletes finished jobs that ended more than jobsOlder ago (with
// their logs), and the logs of finished jobs that ended more than
// logsOlder ago. 0 leaves that kind alone. Only the admin may prune.
func (c *Client) Prune(ctx context.Context, jobsOlder, logsOlder time.Duration) (PruneResult, error) {
	v := url.Values{}
	v.Set("jobs_older_than", jobsOlder.String())
	v.Set("logs_older_than", logsOlder.String())
	var r PruneResult
	err := c.do(ctx, http.MethodPost, "/api/v1/jobs/prune?"+v.Encode(), nil, &r)
	return r, err
}
