package gitlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/berth-ci/berth/jobsource"
)

// GitLab hands a job to one runner and waits for its final update; a
// berth killed meanwhile (kill -9, OOM, a host crash) forgot it, and the
// job stayed "running" on GitLab until GitLab's own timeout, hours later
// (issue 32). So with Config.LedgerDir every job GitLab hands out is
// written there (its ID and job token) before berth acts on it, and
// removed once its final state reached GitLab. The first Request of a
// new process fails every job left there on GitLab, with the reason
// GitLab knows for a runner's own failure: after any restart, every job
// GitLab handed out gets a final state.

// ledgerEntry is one job handed out and not yet finished on GitLab.
type ledgerEntry struct {
	ID    int64  `json:"id"`
	Token string `json:"token"`
	// Reason is the failure reason GitLab accepts for this job (it
	// announced the ones it knows in the job's features).
	Reason  string    `json:"reason,omitempty"`
	HandOut time.Time `json:"handed_out"`
}

func (s *Source) ledgerPath(id int64) string {
	return filepath.Join(s.cfg.LedgerDir, strconv.FormatInt(id, 10)+".json")
}

// ledgerAdd records a job GitLab handed out, before berth acts on it.
func (s *Source) ledgerAdd(p *jobPayload) {
	if s.cfg.LedgerDir == "" {
		return
	}
	e := ledgerEntry{ID: p.ID, Token: p.Token, HandOut: time.Now().UTC(),
		Reason: allowedReason(failureReason(jobsource.FailureSystem), p.Features.FailureReasons)}
	data, _ := json.Marshal(e)
	path := s.ledgerPath(p.ID)
	tmp := path + ".tmp"
	err := os.MkdirAll(s.cfg.LedgerDir, 0o700)
	if err == nil {
		err = os.WriteFile(tmp, data, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		s.log.Warn("cannot record the gitlab job handed out; if berth dies before it ends, GitLab keeps it running until its own timeout", "job", p.ID, "err", err)
	}
}

// ledgerDone forgets a job whose final state reached GitLab (or that
// GitLab no longer runs).
func (s *Source) ledgerDone(id int64) {
	if s.cfg.LedgerDir == "" {
		return
	}
	if err := os.Remove(s.ledgerPath(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("cannot forget a finished gitlab job; the next start tells GitLab again (it refuses: the job is over)", "job", id, "err", err)
	}
}

// failAbandoned fails on GitLab every job a previous process of this
// source was handed and did not finish, and returns how many it ended.
func (s *Source) failAbandoned(ctx context.Context) int {
	if s.cfg.LedgerDir == "" {
		return 0
	}
	ents, err := os.ReadDir(s.cfg.LedgerDir)
	if err != nil {
		return 0
	}
	n := 0
	for _, ent := range ents {
		name := ent.Name()
		if strings.HasSuffix(name, ".tmp") {
			os.Remove(filepath.Join(s.cfg.LedgerDir, name)) // a write cut short
			continue
		}
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(s.cfg.LedgerDir, name))
		var e ledgerEntry
		if err != nil || json.Unmarshal(data, &e) != nil || e.ID == 0 {
			s.log.Warn("unreadable record of a gitlab job handed out; removed", "file", name)
			os.Remove(filepath.Join(s.cfg.LedgerDir, name))
			continue
		}
		if s.failOnGitLab(ctx, e) {
			n++
			s.ledgerDone(e.ID)
		}
	}
	return n
}

// failOnGitLab sends the final "failed" of a job berth lost, and says
// whether GitLab has a final state for it now. GitLab's copy of the log
// is whatever the previous process sent; its checksum is unknown here, so
// a 412 (GitLab's copy differs) makes GitLab drop it, and the update is
// sent again for an empty log.
func (s *Source) failOnGitLab(ctx context.Context, e ledgerEntry) bool {
	h := http.Header{}
	h.Set("JOB-TOKEN", e.Token)
	body := updateJobRequest{Token: e.Token, Info: s.versionInfo(), State: "failed", FailureReason: e.Reason,
		Output: jobOutput{Checksum: fmt.Sprintf("crc32:%08x", crc32.ChecksumIEEE(nil)), Bytesize: 0}}
	for range 5 {
		resp, err := s.client.doJSON(ctx, http.MethodPut, "jobs/"+strconv.FormatInt(e.ID, 10), h, body)
		if err != nil {
			s.log.Warn("cannot tell GitLab that a job berth lost at its restart failed; trying again at the next start", "job", e.ID, "err", err)
			return false
		}
		switch resp.status {
		case http.StatusOK:
			s.log.Warn("gitlab job handed to berth before its restart marked failed on GitLab: berth lost it (killed or crashed) before it ended", "job", e.ID, "handed_out", e.HandOut)
			return true
		case http.StatusForbidden, http.StatusNotFound:
			return true // GitLab ended it already (canceled, timed out, finished)
		case http.StatusPreconditionFailed, http.StatusAccepted:
			continue
		default:
			s.log.Warn("GitLab refused the failure of a job berth lost at its restart", "job", e.ID, "status", resp.status)
			return false
		}
	}
	return false
}
