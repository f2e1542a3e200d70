package gitlabfake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Runner token expiry and rotation, as GitLab serves them
// (lib/api/ci/runner.rb; network/gitlab.go ResetToken in gitlab-runner):
//
//   - POST /runners/verify answers {id, token, token_expires_at}, the
//     expiry null for a token that never expires;
//   - POST /runners/reset_authentication_token {token} → 201 {token,
//     token_expires_at} with a new token; the old one is refused from then
//     on (403), as GitLab replaces it.

// EndpointResetToken is the token reset endpoint's name in Request.Endpoint.
const EndpointResetToken = "reset_token"

// expiresAt is token_expires_at for a token verified or reset now.
func (f *Fake) expiresAt() any {
	if f.opts.TokenExpiresIn <= 0 {
		return nil
	}
	return time.Now().Add(f.opts.TokenExpiresIn).UTC().Format(time.RFC3339Nano)
}

// Rotations is how often the runner token was reset.
func (f *Fake) Rotations() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rotations
}

func (f *Fake) handleResetToken(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var b struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		f.record(EndpointResetToken, r, 0, http.StatusBadRequest, body)
		http.Error(w, `{"message":"400 Bad request"}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	if b.Token != f.token {
		f.mu.Unlock()
		f.record(EndpointResetToken, r, 0, http.StatusForbidden, body)
		http.Error(w, `{"message":"403 Forbidden"}`, http.StatusForbidden)
		return
	}
	f.rotations++
	f.token = fmt.Sprintf("glrt-rotated-%d", f.rotations)
	token := f.token
	f.mu.Unlock()
	f.record(EndpointResetToken, r, 0, http.StatusCreated, body)
	writeJSON(w, http.StatusCreated, map[string]any{"token": token, "token_expires_at": f.expiresAt()})
}
