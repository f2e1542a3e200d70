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
			if json.Unmarshal(b, &h) == nil && resp.StatusCode == http.StatusServiceUnavailable && h.Status == "starting" && len(h.Problems) == 1 {
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
