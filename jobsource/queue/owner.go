package queue

import (
	"fmt"
	"net/http"

	"github.com/berth-ci/berth/api"
)

// Ownership: every job records the principal that submitted it (see
// api.Principal). A submitter sees only its own jobs; an environment key
// belongs to the owner of the job that parked it and resumes only for that
// owner (or the admin). Jobs stored before owners existed have none and
// belong to the admin.

// bucketEnvOwners maps an environment key to the owner of the job that
// parked it, so that a submit with resume can be checked without scanning
// every job. Created on first use.
var bucketEnvOwners = []byte("env_owners")

// ResumeCheck is asked, at submit, whether an environment key can be
// resumed at all (parked here, not expired). It returns nil, or a
// *RequestError whose status and message the submitter gets (a 404 for an
// unknown key, a 400 for a key of another berth). Set it with
// WithResumeCheck.
type ResumeCheck func(key string) error

// WithResumeCheck makes the queue refuse, at submit, a resume key that
// check refuses, instead of accepting the job and failing it later.
func WithResumeCheck(check ResumeCheck) Option { return func(o *options) { o.resumeCheck = check } }

// EnvOwner returns the owner of the job that parked the environment key,
// and whether the queue knows the key at all.
func (q *Queue) EnvOwner(key string) (owner string, known bool) {
	_ = q.st.view(func(tx tx) error {
		v, err := tx.get(bucketEnvOwners, []byte(key))
		if v != nil {
			owner, known = string(v), true
		}
		return err
	})
	return owner, known
}

// recordEnvOwner notes who owns a freshly parked environment, in the
// transaction that records the job's result.
func recordEnvOwner(tx tx, rec *record) error {
	if rec.EnvKey == "" {
		return nil
	}
	return tx.put(bucketEnvOwners, []byte(rec.EnvKey), []byte(rec.Owner))
}

// checkResume refuses, before anything is stored, a resume key that p may
// not use: one the manager does not know (expired, consumed, from another
// berth) or one parked by another submitter.
func (q *Queue) checkResume(p api.Principal, key string) error {
	if key == "" {
		return nil
	}
	if q.resumeCheck != nil {
		if err := q.resumeCheck(key); err != nil {
			return err
		}
	}
	if p.Admin {
		return nil
	}
	if owner, known := q.EnvOwner(key); !known || !p.Owns(owner) {
		return &RequestError{Status: http.StatusForbidden, Message: fmt.Sprintf(
			"environment %s was parked by another submitter's job: an environment resumes only for the API token whose job parked it (or berth's admin token)", key)}
	}
	return nil
}

// visibleTo hides other submitters' jobs from p: to p they do not exist.
func (q *Queue) visibleTo(p api.Principal, rec *record, id string) error {
	if rec == nil || !p.Owns(rec.Owner) {
		return fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	return nil
}
