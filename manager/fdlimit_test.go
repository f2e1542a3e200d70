package manager

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestFDProblem(t *testing.T) {
	for _, c := range []struct {
		open  int
		limit uint64
		warn  bool
	}{
		{10, 1024, false},
		{921, 1024, false}, // 89.9 %
		{922, 1024, true},
		{1024, 1024, true},
		{5000, 0, false},           // unknown limit
		{5000, ^uint64(0), false},  // unlimited
		{9_500, 1 << 20, false},    // a high hard limit raised at start
		{1_000_000, 1 << 20, true}, // ... can still run out
	} {
		p := fdProblem(c.open, c.limit)
		if (p != "") != c.warn {
			t.Errorf("fdProblem(%d, %d) = %q, want a problem: %v", c.open, c.limit, p, c.warn)
		}
		if p != "" && !strings.Contains(p, "LimitNOFILE") {
			t.Errorf("fdProblem(%d, %d) = %q: does not say how to raise the limit", c.open, c.limit, p)
		}
	}
}

// A berth that holds nearly as many descriptors as it may open is one flood
// away from failing every new job with EMFILE: /healthz must say so before.
func TestHealthzDegradedNearTheOpenFileLimit(t *testing.T) {
	s := newAPIServer(t)
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Fatal(err)
	}
	var u fdUsage
	u.count()
	// A soft limit a little above what is open now, then enough files
	// opened to pass 90 % of it, leaving room for the HTTP request.
	soft := uint64(u.open + 60)
	lim := syscall.Rlimit{Cur: soft, Max: was.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was)
	for range int(float64(soft)*fdWarnFraction) - u.open + 2 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	s.m.fds.mu.Lock()
	s.m.fds.counted = false // count afresh
	s.m.fds.mu.Unlock()
	code, _, body := s.raw(t, "GET", "/healthz", "", "", "", "")
	var h health
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatalf("/healthz: %v: %s", err, body)
	}
	if code != http.StatusServiceUnavailable || h.Status != "degraded" || len(h.Problems) != 1 ||
		!strings.Contains(h.Problems[0], "open files") {
		t.Errorf("/healthz near the open-file limit: %d %s; want 503 degraded saying open files are near the limit", code, body)
	}
}

func TestRaiseFileLimitToTheHardLimit(t *testing.T) {
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Fatal(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was)
	if was.Max < 512 {
		t.Skipf("hard open-file limit %d is too low to lower the soft one under it", was.Max)
	}
	low := syscall.Rlimit{Cur: 256, Max: was.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	raiseFileLimit(slog.New(slog.NewTextHandler(&logged, nil)))
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	if now.Cur != was.Max {
		t.Errorf("soft open-file limit after raiseFileLimit = %d, want the hard limit %d", now.Cur, was.Max)
	}
	if !strings.Contains(logged.String(), "was=256") {
		t.Errorf("the log does not give the limit berth found: %s", logged.String())
	}
}
