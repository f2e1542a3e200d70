package gitlab

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berth-ci/berth/internal/gitlabfake"
)

// Ready retries while GitLab fails, says why in Problem, and returns once
// the token is verified.
func TestReadyWaitsForGitLab(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	target, _ := url.Parse(f.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var calls atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 3 {
			http.Error(w, "502 Bad Gateway", http.StatusBadGateway) // GitLab's nginx while puma is down
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(down.Close)
	s := newTestSource(t, f, func(c *Config) { c.URL = down.URL; c.VerifyMaxDelay = 20 * c.RetryBaseDelay })
	if err := s.Ready(testCtx(t)); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if n := calls.Load(); n != 4 {
		t.Errorf("%d token checks, want 4", n)
	}
	if p := s.Problem(); p != "" {
		t.Errorf("Problem after the token was verified: %q", p)
	}
	if err := s.Ready(testCtx(t)); err != nil || calls.Load() != 4 {
		t.Errorf("second Ready: %v after %d checks; want nil at once", err, calls.Load())
	}
}

// A token GitLab refuses is final: Ready returns it at once from then on.
func TestReadyTokenRejectedIsFinal(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	s := newTestSource(t, f, func(c *Config) { c.Token = "glrt-wrong" })
	for range 2 {
		if err := s.Ready(testCtx(t)); !errors.Is(err, ErrTokenRejected) {
			t.Fatalf("Ready = %v, want ErrTokenRejected", err)
		}
	}
	if n := f.Count(gitlabfake.EndpointVerify, 0); n != 1 {
		t.Errorf("%d token checks, want 1", n)
	}
	if p := s.Problem(); !strings.Contains(p, "token rejected") || !strings.Contains(p, f.URL()) {
		t.Errorf("Problem = %q", p)
	}
}
