package manager

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"time"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/ha"
	"github.com/berth-ci/berth/jobsource/gitlab"
)

// Every job GitLab hands out is recorded in a ledger until its final state
// reached GitLab (gitlab/ledger.go), so that a berth killed while running
// it does not leave it "running" on GitLab until GitLab's timeout. A
// single manager keeps the ledger in its state dir and sweeps it at its
// first job request; under [ha] it lives in etcd and every new leader
// sweeps it at the start of its term, so the jobs of a leader that never
// comes back are failed too (docs/ha.md).

// gitlabRunner names one GitLab and runner token without revealing the
// token: each has its own ledger, so that one source's sweep never fails
// another's running job.
func gitlabRunner(url, token string) string {
	sum := sha256.Sum256([]byte(url + "\x00" + token))
	return hex.EncodeToString(sum[:8])
}

// gitlabLedger is the ledger of the GitLab source s.
func (m *Manager) gitlabLedger(s config.Source) gitlab.Ledger {
	runner := gitlabRunner(s.URL, s.Token)
	if m.ha != nil {
		return ha.NewGitLabLedger(m.ha.cli, m.cfg.HA.KeyPrefix, runner, m.termFence, m.log)
	}
	return gitlab.NewDirLedger(filepath.Join(m.cfg.StateDir, "gitlab-jobs", runner), m.log)
}

// termFence is the fence of the term this manager holds, nil as a standby.
func (m *Manager) termFence() *ha.Fence {
	if t := m.ha.term.Load(); t != nil {
		return t.Fence()
	}
	return nil
}

// sweeper is a source that fails the jobs earlier terms left (gitlab.Source).
type sweeper interface {
	Name() string
	FailAbandoned(ctx context.Context) (int, error)
}

// sweepRetry is the pause before a sweep that left jobs (GitLab did not
// answer) runs again: short beside GitLab's job timeout, long enough not
// to press a GitLab that is down.
const sweepRetry = 30 * time.Second

// sweepAbandoned fails on GitLab, in the background, the jobs the
// leaders of earlier terms were handed and did not finish. Not before
// the job loops: a GitLab that does not answer must not keep the new
// leader from taking jobs, and the jobs it takes meanwhile are of its own
// term, which a sweep never lists. ctx ends with the term.
func (m *Manager) sweepAbandoned(ctx context.Context) {
	for _, s := range m.sources {
		if sw, ok := s.src.(sweeper); ok {
			go m.sweep(ctx, sw)
		}
	}
}

// sweep runs sw's sweep until it leaves nothing or the term ends.
func (m *Manager) sweep(ctx context.Context, sw sweeper) {
	for {
		n, err := sw.FailAbandoned(ctx)
		if n > 0 {
			m.log.Info("failed on GitLab the jobs earlier leaders left running", "source", sw.Name(), "jobs", n)
		}
		if err == nil || ctx.Err() != nil {
			return
		}
		m.log.Warn("gitlab jobs earlier leaders left stay running on GitLab; sweeping again", "source", sw.Name(), "in", sweepRetry, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(sweepRetry):
		}
	}
}
