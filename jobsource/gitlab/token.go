package gitlab

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/berth-ci/berth/internal/atomicfile"
)

// GitLab may make runner tokens expire (Admin > Settings > CI/CD > Runners,
// "Runners expiration"): POST /runners/verify then answers
// token_expires_at, and a runner that does not reset its token in time
// stops getting jobs. berth rotates it as gitlab-runner does
// (commands/multi.go nextRunnerToReset, common.TokenResetIntervalFactor):
// at three quarters of the token's life, POST
// /runners/reset_authentication_token, and saves the new token, here to
// token_file, atomically. A token given inline in berth.toml cannot be
// saved, so it is not rotated (GitLab refuses the old token once reset, and
// a restart would read it again): berth says so and when it expires.

// tokenResetFactor is the part of a token's life after which it is
// reset (gitlab-runner's TokenResetIntervalFactor).
const tokenResetFactor = 0.75

// Token rotation results, as passed to Config.OnTokenRotation.
const (
	RotationOK      = "ok"      // reset and saved
	RotationFailed  = "failed"  // GitLab did not reset it; retried
	RotationUnsaved = "unsaved" // reset, but token_file could not be written; retried
)

// tokenState is the runner token in use and what GitLab said of its life.
type tokenState struct {
	value    string
	obtained time.Time // when berth learnt the expiry (verify) or reset it
	expires  time.Time // zero: never
}

// token returns the runner token in use.
func (s *Source) token() string {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	return s.tok.value
}

// reloadToken reads token_file again and reports whether it holds
// another token than the one in use, which it then uses.
func (s *Source) reloadToken() bool {
	if s.cfg.TokenFile == "" {
		return false
	}
	b, err := os.ReadFile(s.cfg.TokenFile)
	v := strings.TrimSpace(string(b))
	if err != nil || v == "" {
		return false
	}
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if v == s.tok.value {
		return false
	}
	s.tok = tokenState{value: v}
	s.log.Info("token_file holds a new runner token; using it", "token_file", s.cfg.TokenFile)
	return true
}

// noteExpiry records token_expires_at from a verify answer.
func (s *Source) noteExpiry(body []byte) {
	var v struct {
		ExpiresAt *time.Time `json:"token_expires_at"`
	}
	if json.Unmarshal(body, &v) != nil || v.ExpiresAt == nil || v.ExpiresAt.IsZero() {
		return
	}
	s.tmu.Lock()
	s.tok.obtained, s.tok.expires = time.Now(), *v.ExpiresAt
	s.tmu.Unlock()
}

// KeepTokenFresh resets the runner token at three quarters of its life,
// for as long as ctx lasts; it returns at once when the token never
// expires. Run it after Ready, which learns the expiry.
func (s *Source) KeepTokenFresh(ctx context.Context) {
	for attempt := 0; ; {
		s.tmu.Lock()
		t := s.tok
		s.tmu.Unlock()
		if t.expires.IsZero() {
			return
		}
		if s.cfg.TokenFile == "" {
			s.log.Warn("the gitlab runner token expires, and berth cannot rotate it: it is written in berth.toml, where berth does not save a new one; "+
				"move it into a file named by token_file, or renew it in GitLab and restart berth before it expires", "expires_at", t.expires)
			return
		}
		wait := time.Until(t.obtained.Add(time.Duration(tokenResetFactor * float64(t.expires.Sub(t.obtained)))))
		if attempt > 0 {
			wait = backoff(attempt-1, s.cfg.RetryBaseDelay, s.cfg.VerifyMaxDelay)
		}
		if sleep(ctx, wait) != nil {
			return
		}
		result, err := s.rotateToken(ctx)
		if ctx.Err() != nil {
			return
		}
		if s.cfg.OnTokenRotation != nil {
			s.cfg.OnTokenRotation(result)
		}
		if err != nil {
			attempt++
			s.log.Error("gitlab runner token rotation failed; retrying", "result", result, "err", err, "attempt", attempt, "expires_at", t.expires)
			continue
		}
		attempt = 0
		s.tmu.Lock()
		t = s.tok
		s.tmu.Unlock()
		s.log.Info("gitlab runner token rotated and saved", "token_file", s.cfg.TokenFile, "expires_at", t.expires,
			"next_rotation", t.obtained.Add(time.Duration(tokenResetFactor*float64(t.expires.Sub(t.obtained)))))
	}
}

// rotateToken resets the token, or, when an earlier reset could not be
// saved, saves the token in use again.
func (s *Source) rotateToken(ctx context.Context) (string, error) {
	s.tmu.Lock()
	unsaved := s.unsaved
	s.tmu.Unlock()
	if !unsaved {
		resp, err := s.client.doJSON(ctx, http.MethodPost, "runners/reset_authentication_token", nil, struct {
			Token string `json:"token"`
		}{s.token()})
		if err != nil {
			return RotationFailed, err
		}
		if resp.status != http.StatusCreated {
			return RotationFailed, fmt.Errorf("POST runners/reset_authentication_token: status %d: %s", resp.status, truncate(resp.body, 200))
		}
		var v struct {
			Token     string     `json:"token"`
			ExpiresAt *time.Time `json:"token_expires_at"`
		}
		if err := json.Unmarshal(resp.body, &v); err != nil || v.Token == "" {
			return RotationFailed, fmt.Errorf("POST runners/reset_authentication_token: an answer without a token: %s", truncate(resp.body, 200))
		}
		// GitLab refuses the old token from now on: use the new one at once.
		s.tmu.Lock()
		s.tok = tokenState{value: v.Token, obtained: time.Now()}
		if v.ExpiresAt != nil {
			s.tok.expires = *v.ExpiresAt
		}
		s.unsaved = true
		s.tmu.Unlock()
	}
	if err := writeFileAtomic(s.cfg.TokenFile, []byte(s.token()+"\n")); err != nil {
		return RotationUnsaved, fmt.Errorf("the new token is in use but could not be saved, so a restart of berth would be refused by GitLab: %w", err)
	}
	s.tmu.Lock()
	s.unsaved = false
	s.tmu.Unlock()
	return RotationOK, nil
}

// writeFileAtomic replaces path with data: a crash leaves the old file or
// the new one, never a part. The file keeps its mode (0600 when new).
func writeFileAtomic(path string, data []byte) error {
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	return atomicfile.Write(path, data, mode)
}
