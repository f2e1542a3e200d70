package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/provider"
	_ "github.com/berth-ci/berth/provider/sim"
)

// throttledAtStart is the sim provider whose first Inits fail as a
// throttled cloud's do (provider.ErrTransient, which the AWS provider
// returns for throttling past the SDK's retries, see provider/aws).
type throttledAtStart struct {
	provider.InstanceGroup
	fails atomic.Int32
}

func (p *throttledAtStart) Init(ctx context.Context, s provider.Settings) (provider.Info, error) {
	if p.fails.Add(-1) >= 0 {
		return provider.Info{}, fmt.Errorf("%w: aws: DescribeAutoScalingGroups was throttled even after the SDK's retries", provider.ErrTransient)
	}
	return p.InstanceGroup.Init(ctx, s)
}

var throttled = &throttledAtStart{}

func init() {
	provider.Register("throttled-at-start", func() provider.InstanceGroup {
		sim, _ := provider.New("sim")
		throttled.InstanceGroup = sim
		return throttled
	})
}

// Issue 19, failure 6: a transient provider error at start is retried with
// backoff, and /healthz says why berth waits, instead of `berth run`
// exiting 1.
func TestTransientProviderErrorAtStartIsRetried(t *testing.T) {
	throttled.fails.Store(3)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen = %q\nstate_dir = %q\n[autoscaler]\nprovider = \"throttled-at-start\"\n", addr, filepath.Join(dir, "state"))), filepath.Join(dir, "berth.toml"))
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		m   *Manager
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler), Options{StartRetryMax: 300 * time.Millisecond})
		done <- result{m, err}
	}()
	var why string
	deadline := time.Now().Add(30 * time.Second)
	for why == "" && time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			var h health
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if json.Unmarshal(b, &h) == nil && resp.StatusCode == http.StatusServiceUnavailable && h.Status == "starting" && len(h.Problems) == 1 &&
				!strings.Contains(h.Problems[0], "first attempt under way") {
				why = h.Problems[0]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("New after 3 throttled Inits: %v", r.err)
	}
	r.m.close(context.Background())
	if !strings.Contains(why, "throttled") || !strings.Contains(why, "transient") {
		t.Errorf("/healthz while waiting said %q; want the throttling named", why)
	}
	if n := throttled.fails.Load(); n != -1 {
		t.Errorf("Init called %d times, want 4", 3-n)
	}
}

// unreachableAtStart is the sim provider whose Init fails as a plugin's
// does while its cloud's API refuses connections, until up is closed.
type unreachableAtStart struct {
	provider.InstanceGroup
	up chan struct{}
}

func (p *unreachableAtStart) Init(ctx context.Context, s provider.Settings) (provider.Info, error) {
	select {
	case <-p.up:
		return p.InstanceGroup.Init(ctx, s)
	default:
		return provider.Info{}, fmt.Errorf("gcp: instanceGroupManagers.get: dial tcp 127.0.0.1:9: connect: connection refused: %w", provider.ErrTransient)
	}
}

var unreachable = &unreachableAtStart{}

func init() {
	provider.Register("unreachable-at-start", func() provider.InstanceGroup {
		sim, _ := provider.New("sim")
		unreachable.InstanceGroup = sim
		return unreachable
	})
}

// Issue 44: while berth waits for its provider, every API path answers
// 503 "starting" with the reason, before any token check, and the
// client (the CLI's) says it; a submit made then once got a bare 404.
func TestEveryPathAnswersStartingWhileTheProviderIsNotReady(t *testing.T) {
	unreachable.up = make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen = %q\nstate_dir = %q\n[autoscaler]\nprovider = \"unreachable-at-start\"\n", addr, filepath.Join(dir, "state"))), filepath.Join(dir, "berth.toml"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		m, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler), Options{StartRetryMax: 100 * time.Millisecond})
		if err == nil {
			m.close(context.Background())
		}
		done <- err
	}()
	const reason = "connection refused"
	waitStarting := func(method, path string) startingAnswer {
		t.Helper()
		var a startingAnswer
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader(`{"command":["true"]}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable {
					t.Fatalf("%s %s while starting: %d %s; want 503", method, path, resp.StatusCode, b)
				}
				if json.Unmarshal(b, &a) == nil && strings.Contains(a.Error, reason) {
					return a
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("%s %s never answered 503 naming %q (last %+v)", method, path, reason, a)
		return a
	}
	for _, c := range []struct{ method, path string }{
		{http.MethodPost, "/api/v1/jobs"}, {http.MethodGet, "/api/v1/jobs"}, {http.MethodGet, "/healthz"},
		{http.MethodGet, "/api/v1/no-such-path"}, {http.MethodGet, "/"},
	} {
		a := waitStarting(c.method, c.path)
		if a.Status != "starting" || len(a.Problems) != 1 || !strings.Contains(a.Problems[0], `provider "unreachable-at-start"`) {
			t.Errorf("%s %s while starting: %+v; want status starting, naming the provider", c.method, c.path, a)
		}
	}
	_, err = api.NewClient("http://" + addr).Jobs(context.Background())
	if err == nil || !strings.Contains(err.Error(), "berth is starting") || !strings.Contains(err.Error(), reason) {
		t.Errorf("the client while berth starts: %v; want the reason", err)
	}

	close(unreachable.up)
	if err := <-done; err != nil {
		t.Fatalf("New once the provider is reachable: %v", err)
	}
}
