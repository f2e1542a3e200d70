package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
)

// Issue 19: a frozen plugin went unnoticed by /healthz for the whole call
// timeout (62 s). A call running past OverdueAfter shows the plugin as
// degraded, naming the call, long before it times out.
func TestOverdueCallShowsThePluginDegraded(t *testing.T) {
	g, _ := open(t, brokenPlugin, "broken", `{"broken": "hang-update"}`, func(o *Options) {
		o.CallTimeout = time.Minute
		o.OverdueAfter = 100 * time.Millisecond
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		g.Update(ctx, func(string, provider.State) {})
		close(done)
	}()
	waitFor(t, "the hung call to be overdue", func() bool { return g.Health().Status == "degraded" })
	if h := g.Health(); !strings.Contains(h.Overdue, "Update has had no answer") {
		t.Errorf("Health = %+v; want the overdue Update named", h)
	}
	cancel()
	<-done
	if h := g.Health(); h.Status != "ok" || h.Overdue != "" {
		t.Errorf("Health after the call ended = %+v; want ok", h)
	}
}

// The restart backoff starts again from MinBackoff once a plugin ran
// BackoffReset, a config key now (plugin_backoff_reset).
func TestBackoffResetIsAnOption(t *testing.T) {
	g := New(Options{Name: "x", Path: "/bin/true", BackoffReset: time.Second})
	if g.opts.BackoffReset != time.Second || New(Options{}).opts.BackoffReset != 5*time.Minute {
		t.Errorf("BackoffReset = %v, default %v", g.opts.BackoffReset, New(Options{}).opts.BackoffReset)
	}
}
