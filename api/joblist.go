package api

import (
	"encoding/json"
	"net/http"
)

// JobListStream writes a JobList body job by job, so that a page costs
// the server one job's encoding at a time rather than the whole page's
// (issue 43, item 8).
type JobListStream struct {
	w     http.ResponseWriter
	count int
	err   error
}

// StartJobList answers 200 and opens the body's "jobs" array.
func StartJobList(w http.ResponseWriter) *JobListStream {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	s := &JobListStream{w: w}
	_, s.err = w.Write([]byte(`{"jobs":[`))
	return s
}

// Add writes one job; after the first failed write (the client went
// away) it does nothing and returns that error.
func (s *JobListStream) Add(j Job) error {
	if s.err != nil {
		return s.err
	}
	b, err := json.Marshal(j)
	if err != nil {
		s.err = err
		return err
	}
	if s.count > 0 {
		b = append([]byte{','}, b...)
	}
	s.count++
	_, s.err = s.w.Write(append(b, '\n'))
	return s.err
}

// End closes the array and the body with the page's next cursor.
func (s *JobListStream) End(next string) {
	if s.err != nil {
		return
	}
	tail := "]"
	if next != "" {
		b, _ := json.Marshal(next)
		tail += `,"next":` + string(b)
	}
	_, s.err = s.w.Write([]byte(tail + "}\n"))
}

// Abort ends a list that failed after its status was sent: the
// connection is cut, so the client sees a broken body, never a short
// list that looks whole.
func (s *JobListStream) Abort() { panic(http.ErrAbortHandler) }
