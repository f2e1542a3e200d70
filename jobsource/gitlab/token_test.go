package gitlab

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
)

// rotations records what OnTokenRotation was told, and how many resets
// GitLab had made at each call.
type rotations struct {
	mu      sync.Mutex
	results []string
	resets  []int
}

func (r *rotations) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.results...)
}

// tokenSource is a source whose token lives in a file of dir, against a
// GitLab whose tokens expire after a second (rotated after 0.75 s).
func tokenSource(t *testing.T, dir string) (*gitlabfake.Fake, *Source, *rotations) {
	f := newFake(t, gitlabfake.Options{TokenExpiresIn: time.Second})
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte(f.Token()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rec := &rotations{}
	s := newTestSource(t, f, func(c *Config) {
		c.Token, c.TokenFile, c.VerifyMaxDelay = "", file, 50*time.Millisecond
		c.OnTokenRotation = func(r string) {
			rec.mu.Lock()
			rec.results, rec.resets = append(rec.results, r), append(rec.resets, f.Rotations())
			rec.mu.Unlock()
		}
	})
	return f, s, rec
}

// Issue 42, item 5: a token that expires is reset before it does, and the
// new one is saved to token_file, where a restart finds it.
func TestTokenRotatedBeforeItExpires(t *testing.T) {
	dir := t.TempDir()
	f, s, rec := tokenSource(t, dir)
	first := f.Token()
	ctx := testCtx(t)
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	rotating, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.KeepTokenFresh(rotating); close(done) }()
	file := filepath.Join(dir, "token")
	waitFor(t, "a rotated token in token_file", func() bool {
		b, _ := os.ReadFile(file)
		return len(rec.seen()) > 0 && strings.TrimSpace(string(b)) != first
	})
	stop() // no more rotations: the checks below see one token
	<-done
	if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != f.Token() {
		t.Fatalf("token_file holds another token than GitLab's")
	}
	if r := rec.seen(); r[0] != RotationOK {
		t.Errorf("rotation results %v, want ok", r)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token_file mode %v (%v), want 0600 kept", fi.Mode(), err)
	}
	// The source goes on with the new token: GitLab refuses the old one.
	if _, err := s.Request(ctx); err != nil {
		t.Errorf("job request after the rotation: %v", err)
	}
	// A restart reads the saved token and is accepted.
	again := newTestSource(t, f, func(c *Config) { c.Token, c.TokenFile = "", file })
	if err := again.Verify(ctx); err != nil {
		t.Errorf("a restart with the saved token: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("token_file's directory holds %d entries, want the file alone (no temp files left)", len(entries))
	}
}

// A reset whose token cannot be saved is saved later, without resetting
// the token again (GitLab already refuses the old one).
func TestRotatedTokenSavedOnceTheFileCanBeWritten(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secrets")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, s, rec := tokenSource(t, dir)
	ctx := testCtx(t)
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil { // the file's directory is gone
		t.Fatal(err)
	}
	go s.KeepTokenFresh(ctx)
	waitFor(t, "a rotation that could not be saved", func() bool { return len(rec.seen()) > 0 })
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the token saved", func() bool {
		for _, r := range rec.seen() {
			if r == RotationOK {
				return true
			}
		}
		return false
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.results[0] != RotationUnsaved {
		t.Errorf("results %v, want unsaved first", rec.results)
	}
	for i, r := range rec.results {
		if r == RotationOK && rec.resets[i] != 1 {
			t.Errorf("token saved after %d resets, want 1: a retry must save, not reset again", rec.resets[i])
		}
		if r == RotationOK {
			break
		}
	}
}

// A token written in berth.toml is not rotated: berth could not save a new
// one, and GitLab would refuse the old one at the next start.
func TestInlineTokenNotRotated(t *testing.T) {
	f := newFake(t, gitlabfake.Options{TokenExpiresIn: 100 * time.Millisecond})
	s := newTestSource(t, f, nil)
	ctx := testCtx(t)
	if err := s.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	s.KeepTokenFresh(ctx) // returns at once
	if n := f.Rotations(); n != 0 {
		t.Errorf("%d rotations of an inline token", n)
	}
}

// A token GitLab refuses is checked against token_file once more before
// the source gives up: another berth (or the operator) may have put a new
// one there since this one was read.
func TestRejectedTokenRereadFromTokenFile(t *testing.T) {
	dir := t.TempDir()
	f, s, _ := tokenSource(t, dir)
	resp, err := http.Post(f.URL()+"/api/v4/runners/reset_authentication_token", "application/json", strings.NewReader(`{"token":"`+f.Token()+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Token string }
	_ = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(v.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(testCtx(t)); err != nil {
		t.Fatalf("Ready with the new token in token_file: %v", err)
	}
}
