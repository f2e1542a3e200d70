package manager

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
)

// A GitLab source's proxy, builds_dir and output_limit reach the source:
// every call to GitLab goes through the proxy, the job checks out under
// builds_dir, and its log is cut at output_limit kilobytes with
// gitlab-runner's notice.
func TestGitLabSourceKeys(t *testing.T) {
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	t.Cleanup(fake.Close) // after the manager stops (cleanups run last first)
	var proxied atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		r.RequestURI = "" // a forward proxy's request becomes a client request
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			w.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(proxy.Close)
	id := fake.AddJob(gitlabfake.JobSpec{
		Script:    []string{`echo "builds in $CI_BUILDS_DIR"`, `head -c 5000 /dev/zero | tr '\0' x`, "echo", "echo after the limit"},
		Variables: []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}},
	})
	startManager(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
check_interval = "100ms"
proxy = %q
builds_dir = "/tmp/ci-builds"
output_limit = 2
`, fake.URL(), proxy.URL))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := fake.WaitAllDone(ctx); err != nil {
		t.Fatalf("job did not finish: %v", err)
	}
	trace := fake.Job(id).Trace()
	if !strings.Contains(trace, "builds in /tmp/ci-builds") {
		t.Errorf("builds_dir not used:\n%s", trace)
	}
	if !strings.Contains(trace, "Job's log exceeded limit of 2048 bytes") || strings.Contains(trace, "after the limit") {
		t.Errorf("output_limit = 2 (KiB) not applied:\n%s", trace)
	}
	if proxied.Load() == 0 {
		t.Error("no request went through the proxy")
	}
}
