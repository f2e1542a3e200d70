package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
)

// Issue 42, item 4: berth comes up while GitLab does not answer. Three
// GitLab sources: one refuses connections, one is frozen (accepts and never
// answers), one refuses the runner token. berth starts anyway (New used to
// verify every token before the API listened: a refused connection exited
// at once, a frozen GitLab held berth for 2 min), /healthz names each
// GitLab, and once the frozen one answers its job runs while the others
// stay out.
func TestGitLabDownAtStartDoesNotStopBerth(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()

	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	t.Cleanup(fake.Close)
	id := fake.AddJob(gitlabfake.JobSpec{Script: []string{"echo after the thaw"}, Variables: []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}}})
	thaw := make(chan struct{})
	target, _ := url.Parse(fake.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	frozen := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // frozen: the request is accepted and not answered
		case <-thaw:
		case <-r.Context().Done():
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(frozen.Close)
	t.Cleanup(func() {
		select {
		case <-thaw:
		default:
			close(thaw)
		}
	})
	other := gitlabfake.New(gitlabfake.Options{Token: "glrt-other"})
	t.Cleanup(other.Close)

	m := startManager(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
check_interval = "100ms"
[[source]]
kind = "gitlab"
url = %q
token = "glrt-wrong"
[autoscaler]
max_instances = 2
`, refused, frozen.URL, other.URL()))

	waitHealth(t, m, "every GitLab named", func(h health) bool {
		return len(h.Problems) == 3 && strings.Contains(h.Problems[0], "did not answer the runner token check") &&
			strings.Contains(h.Problems[1], "waiting for GitLab to answer") && strings.Contains(h.Problems[2], "token rejected")
	})
	close(thaw)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := fake.WaitAllDone(ctx); err != nil {
		t.Fatalf("the job of the thawed GitLab did not finish: %v", err)
	}
	if j := fake.Job(id); j.ReportedState() != "success" || !strings.Contains(j.Trace(), "after the thaw") {
		t.Fatalf("job %s:\n%s", j.ReportedState(), j.Trace())
	}
	h := waitHealth(t, m, "the thawed GitLab no longer named", func(h health) bool { return len(h.Problems) == 2 })
	if strings.Contains(strings.Join(h.Problems, "\n"), frozen.URL) || !strings.Contains(h.Problems[0], refused) || !strings.Contains(h.Problems[1], other.URL()) {
		t.Errorf("/healthz problems %q", h.Problems)
	}
	if n := other.Count(gitlabfake.EndpointRequest, 0); n != 0 {
		t.Errorf("%d job requests with the rejected token, want none", n)
	}
	if n := other.Count(gitlabfake.EndpointVerify, 0); n != 1 {
		t.Errorf("rejected token checked %d times, want 1 (a 403 is final)", n)
	}
}

// waitHealth polls /healthz until cond holds for its body, which must come
// with 503 while it names a problem.
func waitHealth(t *testing.T, m *Manager, what string, cond func(health) bool) health {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		rec := httptest.NewRecorder()
		m.serveHealth(rec, nil)
		var h health
		if err := json.Unmarshal(rec.Body.Bytes(), &h); err != nil {
			t.Fatal(err)
		}
		if len(h.Problems) > 0 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("/healthz %d with problems %q", rec.Code, h.Problems)
		}
		if cond(h) {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz never had %s: %d %q", what, rec.Code, h.Problems)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
