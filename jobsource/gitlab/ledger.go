package gitlab

import (
	"context"
	"fmt"
	"hash/crc32"
	"net/http"
	"strconv"
	"time"

	"github.com/berth-ci/berth/jobsource"
)

// GitLab hands a job to one runner and waits for its final update; a
// berth killed meanwhile (kill -9, OOM, a host crash) forgot it, and the
// job stayed "running" on GitLab until GitLab's own timeout, hours later
// (issue 32). So with Config.Ledger every job GitLab hands out is
// recorded (its ID and job token) before berth acts on it, and removed
// once its final state reached GitLab. The first Request of a new process
// fails every job an earlier one left there on GitLab, with the reason
// GitLab knows for a runner's own failure: after any restart, every job
// GitLab handed out gets a final state. Under [ha] the ledger lives in
// etcd and each new leader sweeps it too (FailAbandoned), so a leader
// that never comes back does not leave its jobs running.

// LedgerEntry is one job GitLab handed out whose final state has not
// reached GitLab yet: what another process needs to fail it.
type LedgerEntry struct {
	// ID is GitLab's job ID.
	ID int64 `json:"id"`
	// Token is the job token: GitLab takes the job's final state only
	// with it.
	Token string `json:"token"`
	// Reason is the failure reason GitLab accepts for this job (it
	// announced the ones it knows in the job's features).
	Reason string `json:"reason,omitempty"`
	// URL is the GitLab the job came from, for an operator reading the
	// ledger; the source that sweeps it talks to its own.
	URL string `json:"url,omitempty"`
	// HandOut is when GitLab handed the job out, for the log of a sweep.
	HandOut time.Time `json:"handed_out"`
}

// Ledger keeps the jobs GitLab handed out until their final state reached
// GitLab. DirLedger keeps them in a directory (one manager); package ha
// keeps them in etcd, shared by the managers of a fleet.
type Ledger interface {
	// Add records a job before berth acts on it. An error leaves the job
	// unrecorded; the job still runs, but a berth that dies before it ends
	// leaves it running on GitLab until GitLab's timeout.
	Add(ctx context.Context, e LedgerEntry) error
	// Remove forgets a job whose final state reached GitLab, or that
	// GitLab no longer runs. Removing a job the ledger does not hold is no
	// error. An error leaves it recorded: a later sweep tells GitLab again
	// and GitLab refuses (the job is over), which removes it.
	Remove(ctx context.Context, id int64) error
	// Abandoned lists the jobs recorded by an earlier process (under [ha]:
	// in an earlier term) and not removed: those nobody will finish. Jobs
	// recorded since this process (term) started are not listed.
	Abandoned(ctx context.Context) ([]LedgerEntry, error)
}

// ledgerAdd records a job GitLab handed out, before berth acts on it.
func (s *Source) ledgerAdd(p *jobPayload) {
	s.mu.Lock()
	s.mine[p.ID] = true
	s.mu.Unlock()
	if s.cfg.Ledger == nil {
		return
	}
	e := LedgerEntry{ID: p.ID, Token: p.Token, URL: s.cfg.URL, HandOut: time.Now().UTC(),
		Reason: allowedReason(failureReason(jobsource.FailureSystem), p.Features.FailureReasons)}
	if err := s.cfg.Ledger.Add(context.Background(), e); err != nil {
		s.log.Warn("cannot record the gitlab job handed out; if berth dies before it ends, GitLab keeps it running until its own timeout", "job", p.ID, "err", err)
	}
}

// ledgerDone forgets a job whose final state reached GitLab (or that
// GitLab no longer runs).
func (s *Source) ledgerDone(id int64) {
	if s.cfg.Ledger == nil {
		return
	}
	if err := s.cfg.Ledger.Remove(context.Background(), id); err != nil {
		s.log.Warn("cannot forget a finished gitlab job; a later sweep tells GitLab again (it refuses: the job is over)", "job", id, "err", err)
	}
}

// released says this process no longer runs the job: Finish returned,
// whether or not GitLab heard it.
func (s *Source) released(id int64) {
	s.mu.Lock()
	delete(s.mine, id)
	delete(s.slots, id) // slots.go
	s.mu.Unlock()
}

// runsHere says whether this process still runs the job (a manager that
// leads again while jobs of its earlier term run).
func (s *Source) runsHere(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mine[id]
}

// FailAbandoned fails on GitLab every job the ledger lists as abandoned
// (Ledger.Abandoned) and this process does not run, removes those GitLab
// has a final state for, and returns how many it ended. The error says
// the listing failed or some jobs could not be failed (GitLab did not
// answer): a later sweep tries again. The first Request runs it; under
// [ha] the manager runs it at the start of each term. One sweep runs at a
// time, so that two never tell GitLab twice.
func (s *Source) FailAbandoned(ctx context.Context) (int, error) {
	if s.cfg.Ledger == nil {
		return 0, nil
	}
	s.sweeping.Lock()
	defer s.sweeping.Unlock()
	left, err := s.cfg.Ledger.Abandoned(ctx)
	if err != nil {
		return 0, fmt.Errorf("list the gitlab jobs an earlier berth left: %w", err)
	}
	ended, failed := 0, 0
	for _, e := range left {
		if s.runsHere(e.ID) {
			continue // its own Finish tells GitLab
		}
		if !s.failOnGitLab(ctx, e) {
			failed++
			continue
		}
		ended++
		s.ledgerDone(e.ID)
	}
	if failed > 0 {
		return ended, fmt.Errorf("%d gitlab jobs an earlier berth left could not be failed on GitLab", failed)
	}
	return ended, nil
}

// failOnGitLab sends the final "failed" of a job berth lost, and says
// whether GitLab has a final state for it now. GitLab's copy of the log
// is whatever the previous process sent; its checksum is unknown here, so
// a 412 (GitLab's copy differs) makes GitLab drop it, and the update is
// sent again for an empty log.
func (s *Source) failOnGitLab(ctx context.Context, e LedgerEntry) bool {
	h := http.Header{}
	h.Set("JOB-TOKEN", e.Token)
	body := updateJobRequest{Token: e.Token, Info: s.versionInfo(), State: "failed", FailureReason: e.Reason,
		Output: jobOutput{Checksum: fmt.Sprintf("crc32:%08x", crc32.ChecksumIEEE(nil)), Bytesize: 0}}
	for range 5 {
		resp, err := s.client.doJSON(ctx, http.MethodPut, "jobs/"+strconv.FormatInt(e.ID, 10), h, body)
		if err != nil {
			s.log.Warn("cannot tell GitLab that a job berth lost failed; trying again at the next sweep", "job", e.ID, "err", err)
			return false
		}
		switch resp.status {
		case http.StatusOK:
			s.log.Warn("gitlab job lost by berth marked failed on GitLab: the berth it was handed to was killed, crashed or lost its leadership before it ended", "job", e.ID, "handed_out", e.HandOut)
			return true
		case http.StatusForbidden, http.StatusNotFound:
			return true // GitLab ended it already (canceled, timed out, finished)
		case http.StatusPreconditionFailed, http.StatusAccepted:
			continue
		default:
			s.log.Warn("GitLab refused the failure of a job berth lost", "job", e.ID, "status", resp.status)
			return false
		}
	}
	return false
}
