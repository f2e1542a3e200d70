package manager

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gitlabfake"
)

// lockedBuffer collects berth's log while goroutines write to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestGitLabRunnerTokenNeverReachesAJob runs a job that hunts for the runner
// token the way an attacker's job would: its own environment, the
// environment of every process it can see, the token file at the path the
// config names, and the files of its instance. Whatever it finds must not
// reach its log; the token must not be in berth's own log either, and it
// must travel to GitLab only on the runner endpoints.
func TestGitLabRunnerTokenNeverReachesAJob(t *testing.T) {
	const runnerToken = "glrt-leak-canary-7f3a9c"
	fake := gitlabfake.New(gitlabfake.Options{Token: runnerToken, TraceUpdateInterval: 1})
	defer fake.Close()
	// Not under /tmp: a sandbox has a private /tmp and would not see it.
	tokDir, err := os.MkdirTemp("/var/tmp", "berth-token-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tokDir) })
	tokenFile := filepath.Join(tokDir, "gitlab-token")
	if err := os.WriteFile(tokenFile, []byte(runnerToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hunt := []string{
		"env",
		"(cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n') || true",
		fmt.Sprintf("cat %s 2>&1 || true", tokenFile),
		"echo hunt-done",
	}
	id := fake.AddJob(gitlabfake.JobSpec{Script: hunt, Variables: []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}}})
	var berthLog lockedBuffer
	startManagerLog(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token_file = %q
check_interval = "100ms"
[autoscaler]
max_instances = 1
`, fake.URL(), tokenFile), &berthLog)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := fake.WaitAllDone(ctx); err != nil {
		t.Fatalf("the job did not finish: %v", err)
	}
	trace := fake.Job(id).Trace()
	if !strings.Contains(trace, "hunt-done") || !strings.Contains(trace, "PATH=") {
		t.Fatalf("the job did not run its hunt; trace:\n%s", trace)
	}
	if strings.Contains(trace, runnerToken) {
		t.Errorf("the runner token reached the job's log:\n%s", trace)
	}
	if strings.Contains(berthLog.String(), runnerToken) {
		t.Errorf("the runner token is in berth's own log")
	}
	for _, r := range fake.Requests() {
		if (r.Endpoint == gitlabfake.EndpointTrace || r.Endpoint == gitlabfake.EndpointUpdate) && r.RunnerToken != "" {
			t.Errorf("%s for job %d carried the runner token; job endpoints take the job token only", r.Endpoint, r.JobID)
		}
	}
}
