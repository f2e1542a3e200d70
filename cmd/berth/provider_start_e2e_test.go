package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/gcpfake"
)

// Issue 44, item 4, on the real berth and plugin binaries: the cloud's
// API refuses connections when berth starts. berth does not exit: it
// waits with backoff, /healthz and every API path answer 503 "starting"
// naming the provider and the error (a submit gets that, not a 404), and
// once the API listens berth becomes ready and runs jobs.
func TestProviderUnreachableAtStartIsWaitedFor(t *testing.T) {
	dir := t.TempDir()
	opts := gcpfake.Options{BootTime: 300 * time.Millisecond, StopTime: 300 * time.Millisecond,
		OperationTime: 200 * time.Millisecond, Dir: filepath.Join(dir, "instances"), State: filepath.Join(dir, "project.json")}
	cloud, cfg := gcpProject(t, opts, 2)
	// The project's endpoint and keys are now in berth's config and the
	// state file; nothing listens there until the fake starts again.
	cloud.Close()

	d := newDaemonUnstarted(t, cfg)
	d.spawn()
	var body string
	waitFor(t, time.Minute, "/healthz to say berth is starting, naming the provider and the refused connection", func() bool {
		select {
		case <-d.done:
			t.Fatalf("berth exited while the cloud's API refused connections:\n%s", d.log)
		default:
		}
		var code int
		code, body = d.healthBody()
		return code == 503 && strings.Contains(body, `"starting"`) && strings.Contains(body, `provider \"gcp\"`) &&
			strings.Contains(body, "connection refused")
	})
	_, errOut, code := d.berth("submit", "--", "echo too early")
	if code == 0 || !strings.Contains(errOut, "berth is starting") || !strings.Contains(errOut, "connection refused") {
		t.Errorf("submit while berth starts: exit %d, stderr %q; want the starting state and its reason", code, errOut)
	}

	again, err := gcpfake.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(again.Close)
	d.waitHealthy()
	if out, errOut, code := d.berth("submit", "--wait", "--", "echo ran"); code != 0 || out != "ran\n" {
		t.Fatalf("job once the API listens: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	if n := strings.Count(d.log.String(), "not ready; retrying"); n == 0 {
		t.Errorf("berth logged no retry:\n%s", d.log)
	}
}
