//go:build linux

package security_test

import (
	"regexp"
	"strings"
	"testing"
)

// TestForkBombIsContained starts twice as many processes as an instance
// may have (pids_max 512; the default is 4,096): the kernel must
// refuse some, as root (pids cgroup) and unprivileged (RLIMIT_NPROC), and
// the instance must take the next job.
func TestForkBombIsContained(t *testing.T) {
	f := newFixture(t, `{"pids_max": 512}`)
	code, out := f.job(f.a, "/berth/attack procs 1024")
	if code == 0 || strings.Contains(out, "WORKED") {
		t.Fatalf("a job started 1024 processes (exit %d): %s", code, out)
	}
	if !regexp.MustCompile(`blocked: refused after \d+: .*resource temporarily unavailable`).MatchString(out) {
		t.Errorf("the processes were refused, but not by a pids limit: %s", out)
	}
	t.Logf("fork bomb: %s", strings.TrimSpace(out))
	f.recycle(f.a)
	if code, out := f.job(f.a, "echo next"); code != 0 || out != "next\n" {
		t.Fatalf("the instance does not take the next job: exit %d %q", code, out)
	}
}
