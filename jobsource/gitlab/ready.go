package gitlab

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A berth restarted while GitLab is down must still come up: its API,
// /healthz and the fleet (which watches the instances of jobs still
// running) do not wait for GitLab. Only this source does: Ready verifies
// the runner token in the background, with backoff, and the manager polls
// for jobs once it returns. A token GitLab refuses (403) stops this source
// alone; another source of the same berth goes on.

// Ready verifies the runner token (POST /runners/verify), retrying network
// errors and unexpected answers with backoff from RetryBaseDelay to
// VerifyMaxDelay, until GitLab accepts it (nil), refuses it (an error
// wrapping ErrTokenRejected: final) or ctx ends. Problem says meanwhile
// why the source takes no jobs. Once verified, Ready returns at once.
func (s *Source) Ready(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		s.vmu.Lock()
		verified, fatal := s.verified, s.fatal
		s.vmu.Unlock()
		if verified {
			return nil
		}
		if fatal != nil {
			return fatal
		}
		if attempt == 0 {
			s.vmu.Lock()
			s.problem = s.cfg.Name + " takes no jobs yet: waiting for GitLab to answer the runner token check"
			s.vmu.Unlock()
		}
		err := s.Verify(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.vmu.Lock()
		switch {
		case err == nil:
			s.verified, s.problem = true, ""
		case errors.Is(err, ErrTokenRejected) && s.reloadToken():
			// token_file holds another token than the one refused (another
			// berth of the fleet rotated it, or an operator renewed it):
			// try that one before giving up.
			s.vmu.Unlock()
			continue
		case errors.Is(err, ErrTokenRejected):
			s.fatal = err
			s.problem = fmt.Sprintf("%s takes no jobs: %v; then restart berth", s.cfg.Name, err)
		}
		s.vmu.Unlock()
		if err == nil || s.fatal != nil {
			continue
		}
		wait := backoff(attempt, s.cfg.RetryBaseDelay, s.cfg.VerifyMaxDelay)
		s.log.Warn("gitlab does not answer the runner token check; no jobs from it until it does", "err", err, "attempt", attempt+1, "retry_in", wait)
		s.vmu.Lock()
		s.problem = fmt.Sprintf("%s takes no jobs yet: GitLab did not answer the runner token check (%d tries, next in %s): %v; "+
			"check that GitLab is up and reachable from berth", s.cfg.Name, attempt+1, wait.Round(time.Millisecond), err)
		s.vmu.Unlock()
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// Problem says why the source takes no jobs ("" once its token is
// verified, or before Ready first ran), for /healthz.
func (s *Source) Problem() string {
	s.vmu.Lock()
	defer s.vmu.Unlock()
	return s.problem
}
