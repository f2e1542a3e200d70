package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"time"
)

// gitlabJob is the part of a job of GitLab's jobs API (GET
// /projects/:id/jobs) that a trace needs.
type gitlabJob struct {
	ID             int64      `json:"id"`
	Status         string     `json:"status"`
	CreatedAt      *time.Time `json:"created_at"`
	StartedAt      *time.Time `json:"started_at"`
	FinishedAt     *time.Time `json:"finished_at"`
	QueuedDuration *float64   `json:"queued_duration"`

	// An error answer of the API ({"message": ...} or {"error": ...})
	// saved by mistake in place of a page.
	Message json.RawMessage `json:"message"`
	Error   string          `json:"error"`
}

// GitLabStats says what a conversion of GitLab jobs kept and dropped.
type GitLabStats struct {
	// Read is the number of job objects read.
	Read int
	// Kept is the number of jobs in the returned trace.
	Kept int
	// Duplicates counts jobs read more than once (overlapping pages).
	Duplicates int
	// NotRun counts jobs that never started or have not finished
	// (skipped, manual, canceled while pending, still running).
	NotRun int
	// FromCreatedAt counts kept jobs without queued_duration, whose arrival
	// is their created_at.
	FromCreatedAt int
}

// ReadGitLabJobs turns the output of GitLab's jobs API into a trace. r holds
// one or more JSON arrays of jobs, as saved page by page (`curl ... >>
// jobs.json`), or one job object per line. A job arrives when it became
// pending, started_at − queued_duration; GitLab versions without
// queued_duration give created_at instead, which for jobs of later stages
// is when the pipeline was created, not when the job could run. It runs
// finished_at − started_at. Jobs that never ran, or still run, are left
// out; a job listed twice counts once.
func ReadGitLabJobs(r io.Reader) ([]Job, GitLabStats, error) {
	var st GitLabStats
	seen := map[int64]bool{}
	var jobs []Job
	add := func(j gitlabJob) error {
		if j.ID == 0 && (len(j.Message) > 0 || j.Error != "") {
			msg := j.Error
			if msg == "" {
				msg = string(j.Message)
			}
			return fmt.Errorf("the file holds an error answer from GitLab, not jobs: %s (check the token's read_api scope and the project ID, then export again)", msg)
		}
		st.Read++
		if j.ID != 0 {
			if seen[j.ID] {
				st.Duplicates++
				return nil
			}
			seen[j.ID] = true
		}
		if j.StartedAt == nil || j.FinishedAt == nil || j.FinishedAt.Before(*j.StartedAt) {
			st.NotRun++
			return nil
		}
		var arrival time.Time
		switch {
		case j.QueuedDuration != nil && *j.QueuedDuration >= 0:
			q := time.Duration(math.Round(*j.QueuedDuration * float64(time.Second)))
			arrival = j.StartedAt.Add(-q)
		case j.CreatedAt != nil:
			arrival = *j.CreatedAt
			st.FromCreatedAt++
		default:
			st.NotRun++
			return nil
		}
		jobs = append(jobs, Job{
			Arrival:  arrival.Round(time.Second).UTC(),
			Duration: j.FinishedAt.Sub(*j.StartedAt).Round(time.Second),
		})
		return nil
	}
	dec := json.NewDecoder(r)
	for n := 1; ; n++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, st, fmt.Errorf("GitLab jobs JSON, value %d: %w (want the arrays GET /projects/:id/jobs returns)", n, err)
		}
		if len(raw) > 0 && raw[0] == '[' {
			var page []gitlabJob
			if err := json.Unmarshal(raw, &page); err != nil {
				return nil, st, fmt.Errorf("GitLab jobs JSON, array %d: %w", n, err)
			}
			for _, j := range page {
				if err := add(j); err != nil {
					return nil, st, err
				}
			}
			continue
		}
		var j gitlabJob
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, st, fmt.Errorf("GitLab jobs JSON, value %d: %w (want job objects or arrays of them)", n, err)
		}
		if err := add(j); err != nil {
			return nil, st, err
		}
	}
	if st.Read == 0 {
		return nil, st, errors.New("GitLab jobs JSON holds no jobs")
	}
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].Arrival.Before(jobs[j].Arrival) })
	st.Kept = len(jobs)
	return jobs, st, nil
}
