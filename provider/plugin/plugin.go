// Package plugin runs external berth providers: binaries named
// berth-provider-NAME that serve the instance-group protocol of package sdk
// over hashicorp/go-plugin.
//
// A Group is a provider.InstanceGroup whose calls go to the plugin process.
// It owns that process: every call has a timeout; a plugin that exits,
// times out without answering a health check, or keeps timing out is
// killed and started again with exponential backoff, re-initialised with
// the same settings, and the caller's OnRestart hook asks the fleet for a fresh listing, which
// reconciles the fleet with what the new process reports (the restart rules
// of docs/semantics.md). While a restart is under way calls wait for it, up to their
// timeout, rather than fail at once. Whatever a plugin answers is checked
// before berth believes it: an invalid state, a duplicate ID or an Increase
// that reports more than was asked for is an error of that call, never a
// change to berth's view.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/sdk"
)

// Options configure a Group.
type Options struct {
	// Name is the plugin's name, as in berth-provider-NAME; it labels the
	// plugin's log lines and metrics.
	Name string
	// Path is the plugin binary.
	Path string
	// Logger receives berth's lines about the plugin and the plugin's own
	// log lines, each with plugin=Name.
	Logger *slog.Logger
	// CallTimeout bounds every call to the plugin (default 1m).
	CallTimeout time.Duration
	// StartTimeout bounds starting the process and its Init (default 1m).
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between restarts (defaults
	// 200ms and 1m); the wait doubles after each failed start.
	MinBackoff, MaxBackoff time.Duration
	// BackoffReset is how long a plugin must have run for its next
	// restart to wait only MinBackoff again (default 5m).
	BackoffReset time.Duration
	// OverdueAfter is how long a call may run before the plugin is shown
	// as degraded in Health, long before the call times out (default 10s,
	// at most CallTimeout).
	OverdueAfter time.Duration
	// HungAfter is how many calls in a row may time out before the plugin
	// is taken as hung and restarted (default 2).
	HungAfter int
	// OnRestart is called after a restarted plugin was initialised again.
	OnRestart func()
	// HostKeys records host keys the plugin cannot report (trust on first
	// use). Nil refuses connections to instances without a host key.
	HostKeys HostKeyStore
	// PassMissingHostKeys returns ConnectInfo without a host key as the
	// plugin gave it, for `berth provider test --skip-ssh`, which never
	// connects. berth run never sets it.
	PassMissingHostKeys bool
}

// Health is the state of a plugin, for /healthz.
type Health struct {
	// Name is the plugin's name.
	Name string `json:"name"`
	// Status is "ok", "degraded" (a call is overdue: the plugin may be
	// frozen), "restarting" or "stopped".
	Status string `json:"status"`
	// PID is the plugin process's ID, 0 while none runs.
	PID int `json:"pid,omitempty"`
	// Protocol is the negotiated protocol version.
	Protocol int `json:"protocol,omitempty"`
	// Restarts counts restarts since berth started.
	Restarts int `json:"restarts"`
	// LastError says why the plugin was last restarted.
	LastError string `json:"last_error,omitempty"`
	// Overdue names the oldest call that has run longer than OverdueAfter,
	// and for how long, while Status is "degraded".
	Overdue string `json:"overdue,omitempty"`
}

// conn is one running plugin process.
type conn struct {
	client   *goplugin.Client
	rpc      goplugin.ClientProtocol
	ig       *sdk.Client
	pid      int
	proto    int
	started  time.Time
	timeouts int // calls in a row that timed out
}

// Group is an external provider. It implements provider.InstanceGroup,
// provider.Suspender, provider.Notifier and provider.Recycler whatever the
// plugin supports; Info.Capabilities says which of them work, as the
// plugin's Init reported.
type Group struct {
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	settings provider.Settings
	info     provider.Info
	cur      *conn         // nil while restarting
	up       chan struct{} // closed when cur is set
	status   string
	restarts int
	lastErr  string
	backoff  time.Duration
	stop     chan struct{}
	stopped  bool
	wg       sync.WaitGroup

	// notifyMu guards notifyFn, and is held while it is called, so that
	// once Notify returned the function it replaced is not called again.
	notifyMu sync.Mutex
	notifyFn func(id string, s provider.State)
	// stopWatch ends the current notification stream loop (under mu).
	stopWatch context.CancelFunc

	// inflight holds the calls running now and when each started (under
	// mu), so that Health can tell an overdue call long before it times out.
	inflight map[*inflightCall]struct{}
}

type inflightCall struct {
	method string
	start  time.Time
}

// New returns a Group for the plugin binary opts.Path. Nothing starts until Init.
func New(opts Options) *Group {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = time.Minute
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = time.Minute
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 200 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Minute
	}
	if opts.BackoffReset <= 0 {
		opts.BackoffReset = 5 * time.Minute
	}
	if opts.OverdueAfter <= 0 {
		opts.OverdueAfter = 10 * time.Second
	}
	opts.OverdueAfter = min(opts.OverdueAfter, opts.CallTimeout)
	if opts.HungAfter <= 0 {
		opts.HungAfter = 2
	}
	return &Group{opts: opts, log: opts.Logger.With("plugin", opts.Name), up: make(chan struct{}),
		status: "stopped", stop: make(chan struct{}), backoff: opts.MinBackoff,
		inflight: map[*inflightCall]struct{}{}}
}

// ErrUnavailable is returned by calls made while the plugin is not running
// and did not come back within the call's timeout.
var ErrUnavailable = errors.New("provider plugin unavailable")

// launch starts the plugin process at path and connects to it; the
// caller kills the returned client.
func launch(path string, log *slog.Logger, startTimeout time.Duration) (*goplugin.Client, goplugin.ClientProtocol, *sdk.Client, error) {
	client := goplugin.NewClient(&goplugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sdk.PluginSets(nil),
		Cmd:              exec.Command(path),
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		StartTimeout:     startTimeout,
		Stderr:           &logWriter{log: log},
		// go-plugin's own parsing of plugin output is off: logWriter does it
		// without trusting the plugin's JSON.
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Off}),
	})
	fail := func(err error) (*goplugin.Client, goplugin.ClientProtocol, *sdk.Client, error) {
		client.Kill()
		return nil, nil, nil, err
	}
	rpc, err := client.Client()
	if err != nil {
		return fail(fmt.Errorf("start provider plugin %s: %w", path, err))
	}
	raw, err := rpc.Dispense(sdk.PluginName)
	if err != nil {
		return fail(fmt.Errorf("provider plugin %s: %w", path, err))
	}
	ig, ok := raw.(*sdk.Client)
	if !ok {
		return fail(fmt.Errorf("provider plugin %s: unexpected plugin type %T", path, raw))
	}
	return client, rpc, ig, nil
}

// start launches the plugin process and initialises it.
func (g *Group) start(ctx context.Context) (*conn, provider.Info, error) {
	client, rpc, ig, err := launch(g.opts.Path, g.log, g.opts.StartTimeout)
	if err != nil {
		return nil, provider.Info{}, err
	}
	fail := func(err error) (*conn, provider.Info, error) {
		client.Kill()
		return nil, provider.Info{}, err
	}
	c := &conn{client: client, rpc: rpc, ig: ig, proto: client.NegotiatedVersion(), started: time.Now()}
	if rc := client.ReattachConfig(); rc != nil {
		c.pid = rc.Pid
	}
	ictx, cancel := context.WithTimeout(ctx, g.opts.StartTimeout)
	defer cancel()
	g.mu.Lock()
	settings := g.settings
	g.mu.Unlock()
	info, err := ig.Init(ictx, settings)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		// The plugin's cloud did not answer in time: an API that hangs
		// is as likely to come back as one that refuses connections.
		return fail(fmt.Errorf("initialise provider plugin %s: no answer within %v: %w: %w", g.opts.Name, g.opts.StartTimeout, provider.ErrTransient, err))
	}
	if err != nil {
		return fail(fmt.Errorf("initialise provider plugin %s: %w", g.opts.Name, err))
	}
	return c, info, nil
}

// Init starts the plugin and initialises it with s. If it cannot be
// started, Init fails: berth does not run without its provider.
func (g *Group) Init(ctx context.Context, s provider.Settings) (provider.Info, error) {
	g.mu.Lock()
	g.settings = s
	g.mu.Unlock()
	c, info, err := g.start(ctx)
	if err != nil {
		return provider.Info{}, err
	}
	g.mu.Lock()
	g.info = info
	g.setUpLocked(c)
	g.mu.Unlock()
	g.log.Info("provider plugin started", "path", g.opts.Path, "pid", c.pid, "protocol", c.proto, "id", info.ID, "version", info.Version)
	return info, nil
}

func (g *Group) setUpLocked(c *conn) {
	g.cur = c
	g.status = "ok"
	close(g.up)
	g.wg.Add(1)
	go g.watch(c)
}

// watch notices the plugin process exiting on its own.
func (g *Group) watch(c *conn) {
	defer g.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		g.mu.Lock()
		cur := g.cur
		g.mu.Unlock()
		if cur != c {
			return
		}
		if c.client.Exited() {
			g.fail(c, "the plugin process exited")
			return
		}
	}
}

// fail takes c out of service, kills it and starts a restart. Only the first
// report about a given process counts.
func (g *Group) fail(c *conn, why string) {
	g.mu.Lock()
	if g.cur != c || g.stopped {
		g.mu.Unlock()
		return
	}
	g.cur = nil
	g.up = make(chan struct{})
	g.status = "restarting"
	g.lastErr = why
	if time.Since(c.started) > g.opts.BackoffReset {
		g.backoff = g.opts.MinBackoff // it ran well for a while: a fresh start
	}
	g.wg.Add(1) // under the lock, so Shutdown's Wait sees it
	g.mu.Unlock()
	g.log.Error("provider plugin failed; restarting it", "reason", why, "pid", c.pid, "uptime", time.Since(c.started).Round(time.Millisecond))
	go c.client.Kill()
	go g.restart()
}

func (g *Group) restart() {
	defer g.wg.Done()
	for attempt := 1; ; attempt++ {
		g.mu.Lock()
		wait := g.backoff
		g.backoff = min(2*g.backoff, g.opts.MaxBackoff)
		g.mu.Unlock()
		select {
		case <-g.stop:
			return
		case <-time.After(wait):
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-g.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		c, info, err := g.start(ctx)
		cancel()
		if err != nil {
			g.mu.Lock()
			g.lastErr = err.Error()
			next := g.backoff
			g.mu.Unlock()
			g.log.Error("provider plugin restart failed", "attempt", attempt, "next_try_in", next, "err", err)
			continue
		}
		g.mu.Lock()
		if g.stopped {
			g.mu.Unlock()
			c.client.Kill()
			return
		}
		if info.ID != g.info.ID {
			g.log.Warn("restarted provider plugin reports another group ID; keeping the first", "was", g.info.ID, "now", info.ID)
		}
		if info.Capabilities != g.info.Capabilities {
			g.log.Warn("restarted provider plugin reports other capabilities; restart berth to use them", "was", fmt.Sprintf("%+v", g.info.Capabilities), "now", fmt.Sprintf("%+v", info.Capabilities))
		}
		g.restarts++
		n := g.restarts
		g.setUpLocked(c)
		g.mu.Unlock()
		g.log.Info("provider plugin restarted and initialised; reconciling the listing", "attempt", attempt, "pid", c.pid, "restarts", n)
		if g.opts.OnRestart != nil {
			g.opts.OnRestart()
		}
		return
	}
}

// conn waits for a running plugin, up to ctx.
func (g *Group) conn(ctx context.Context) (*conn, error) {
	for {
		g.mu.Lock()
		c, up, stopped, last := g.cur, g.up, g.stopped, g.lastErr
		g.mu.Unlock()
		if stopped {
			return nil, fmt.Errorf("%w: provider plugin %s was shut down", ErrUnavailable, g.opts.Name)
		}
		if c != nil {
			return c, nil
		}
		select {
		case <-up:
		case <-g.stop:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: provider plugin %s is restarting (last failure: %s)", ErrUnavailable, g.opts.Name, last)
		}
	}
}

// call runs fn against the plugin with the call timeout and judges the
// outcome: a broken connection or repeated timeouts restart the plugin. A
// call that met a broken connection is made once more on the restarted
// plugin, except Increase: whether the dead process created instances is
// for the next listing to say, not for a second request to double.
func (g *Group) call(ctx context.Context, method string, fn func(ctx context.Context, ig *sdk.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, g.opts.CallTimeout)
	defer cancel()
	ic := &inflightCall{method: method, start: time.Now()}
	g.mu.Lock()
	g.inflight[ic] = struct{}{}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.inflight, ic)
		g.mu.Unlock()
	}()
	err := g.call1(ctx, method, fn)
	if errors.Is(err, errBroken) && method != "Increase" && ctx.Err() == nil {
		err = g.call1(ctx, method, fn)
	}
	return err
}

// errBroken marks calls that failed because the plugin process went away.
var errBroken = errors.New("plugin connection broken")

func (g *Group) call1(ctx context.Context, method string, fn func(ctx context.Context, ig *sdk.Client) error) error {
	c, err := g.conn(ctx)
	if err != nil {
		return err
	}
	err = fn(ctx, c.ig)
	if err == nil {
		g.mu.Lock()
		c.timeouts = 0
		g.mu.Unlock()
		return nil
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Internal, codes.DataLoss:
		if status.Code(err) != codes.Internal || c.client.Exited() {
			g.fail(c, fmt.Sprintf("%s: %v", method, err))
			return fmt.Errorf("provider plugin %s: %s: %w: %w", g.opts.Name, method, errBroken, err)
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
		g.mu.Lock()
		c.timeouts++
		n := c.timeouts
		g.mu.Unlock()
		switch {
		case n >= g.opts.HungAfter:
			g.fail(c, fmt.Sprintf("%d calls in a row timed out (last: %s after %v)", n, method, g.opts.CallTimeout))
		case !g.alive(c):
			g.fail(c, fmt.Sprintf("%s timed out after %v and the process does not answer a health check", method, g.opts.CallTimeout))
		}
		return fmt.Errorf("provider plugin %s: %s timed out: %w", g.opts.Name, method, err)
	}
	return fmt.Errorf("provider plugin %s: %s: %w", g.opts.Name, method, err)
}

// alive asks the plugin's gRPC health service, which answers even while the
// group's own code is busy: no answer within a few seconds means the
// process is frozen (stopped, wedged), not merely slow.
func (g *Group) alive(c *conn) bool {
	done := make(chan error, 1)
	go func() { done <- c.rpc.Ping() }() // Ping takes no context; the kill that follows a failure ends it
	select {
	case err := <-done:
		return err == nil
	case <-time.After(min(5*time.Second, g.opts.CallTimeout)):
		return false
	}
}

// Update implements provider.InstanceGroup. The listing is checked whole
// before fn sees any of it.
func (g *Group) Update(ctx context.Context, fn func(id string, s provider.State)) error {
	type item struct {
		id string
		st provider.State
	}
	var items []item
	err := g.call(ctx, "Update", func(ctx context.Context, ig *sdk.Client) error {
		items = items[:0]
		return ig.Update(ctx, func(id string, s provider.State) { items = append(items, item{id, s}) })
	})
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		switch {
		case it.id == "":
			return fmt.Errorf("provider plugin %s listed an instance with an empty ID; listing ignored", g.opts.Name)
		case !it.st.Valid():
			return fmt.Errorf("provider plugin %s listed instance %s in invalid state %q; listing ignored", g.opts.Name, it.id, it.st)
		case seen[it.id]:
			return fmt.Errorf("provider plugin %s listed instance %s twice; listing ignored", g.opts.Name, it.id)
		}
		seen[it.id] = true
	}
	for _, it := range items {
		fn(it.id, it.st)
	}
	return nil
}

// Increase implements provider.InstanceGroup.
func (g *Group) Increase(ctx context.Context, n int) (int, error) {
	var created int
	var perr error
	err := g.call(ctx, "Increase", func(ctx context.Context, ig *sdk.Client) error {
		created, perr = ig.Increase(ctx, n)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if created < 0 || created > n {
		// Do not guess: the listing shows what exists, and the restart
		// rules adopt or delete instances berth does not know.
		return 0, fmt.Errorf("provider plugin %s reported %d instances created of %d asked for; counting none", g.opts.Name, created, n)
	}
	if perr != nil {
		perr = fmt.Errorf("provider plugin %s: Increase: %w", g.opts.Name, perr)
	}
	return created, perr
}

// onlyAsked keeps the accepted IDs that were asked for.
func (g *Group) onlyAsked(method string, ids, acc []string, perr error) ([]string, error) {
	asked := make(map[string]bool, len(ids))
	for _, id := range ids {
		asked[id] = true
	}
	out := acc[:0:0]
	for _, id := range acc {
		if !asked[id] {
			return nil, fmt.Errorf("provider plugin %s: %s accepted %q, which was not asked for", g.opts.Name, method, id)
		}
		out = append(out, id)
	}
	if perr != nil {
		perr = fmt.Errorf("provider plugin %s: %s: %w", g.opts.Name, method, perr)
	}
	return out, perr
}

// Decrease implements provider.InstanceGroup.
func (g *Group) Decrease(ctx context.Context, ids []string) ([]string, error) {
	var acc []string
	var perr error
	err := g.call(ctx, "Decrease", func(ctx context.Context, ig *sdk.Client) error {
		acc, perr = ig.Decrease(ctx, ids)
		return nil
	})
	if err != nil {
		return nil, err
	}
	acc, err = g.onlyAsked("Decrease", ids, acc, perr)
	if g.opts.HostKeys != nil {
		for _, id := range acc {
			if ferr := g.opts.HostKeys.ForgetHostKey(g.groupID(), id); ferr != nil {
				g.log.Warn("cannot forget the recorded host key of a deleted instance", "id", id, "err", ferr)
			}
		}
	}
	return acc, err
}

// Suspend implements provider.Suspender.
func (g *Group) Suspend(ctx context.Context, ids []string) ([]string, error) {
	return g.suspendResume(ctx, "Suspend", ids)
}

// Resume implements provider.Suspender.
func (g *Group) Resume(ctx context.Context, ids []string) ([]string, error) {
	return g.suspendResume(ctx, "Resume", ids)
}

func (g *Group) suspendResume(ctx context.Context, method string, ids []string) ([]string, error) {
	var acc []string
	var perr error
	err := g.call(ctx, method, func(ctx context.Context, ig *sdk.Client) error {
		var err error
		if method == "Suspend" {
			acc, err = ig.Suspend(ctx, ids)
		} else {
			acc, err = ig.Resume(ctx, ids)
		}
		if errors.Is(err, sdk.ErrSuspendUnsupported) {
			return err
		}
		perr = err
		return nil
	})
	if err != nil {
		return nil, err
	}
	return g.onlyAsked(method, ids, acc, perr)
}

// Heartbeat implements provider.InstanceGroup.
func (g *Group) Heartbeat(ctx context.Context, id string) error {
	return g.call(ctx, "Heartbeat", func(ctx context.Context, ig *sdk.Client) error { return ig.Heartbeat(ctx, id) })
}

// ConnectInfo implements provider.InstanceGroup. An answer without a host
// key is completed by trust on first use (see hostkeys.go).
func (g *Group) ConnectInfo(ctx context.Context, id string) (provider.ConnectInfo, error) {
	var ci provider.ConnectInfo
	err := g.call(ctx, "ConnectInfo", func(ctx context.Context, ig *sdk.Client) error {
		var err error
		ci, err = ig.ConnectInfo(ctx, id)
		return err
	})
	if err != nil {
		return provider.ConnectInfo{}, err
	}
	if ci.ID != id {
		return provider.ConnectInfo{}, fmt.Errorf("provider plugin %s answered ConnectInfo(%s) about instance %q", g.opts.Name, id, ci.ID)
	}
	if ci.HostKey == "" && !g.opts.PassMissingHostKeys {
		return g.trustOnFirstUse(ctx, ci)
	}
	return ci, nil
}

// Info returns what the plugin's Init reported.
func (g *Group) Info() provider.Info {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.info
}

func (g *Group) groupID() string { return g.Info().ID }

// Health reports the plugin's state.
func (g *Group) Health() Health {
	g.mu.Lock()
	defer g.mu.Unlock()
	h := Health{Name: g.opts.Name, Status: g.status, Restarts: g.restarts, LastError: g.lastErr}
	if g.cur != nil {
		h.PID, h.Protocol = g.cur.pid, g.cur.proto
	}
	var oldest *inflightCall
	for ic := range g.inflight {
		if oldest == nil || ic.start.Before(oldest.start) {
			oldest = ic
		}
	}
	if age := time.Since(oldestStart(oldest)); oldest != nil && age >= g.opts.OverdueAfter && h.Status == "ok" {
		h.Status = "degraded"
		h.Overdue = fmt.Sprintf("%s has had no answer for %v (the plugin is restarted once calls time out after %v)", oldest.method, age.Round(time.Second), g.opts.CallTimeout)
	}
	return h
}

// Shutdown implements provider.InstanceGroup: it asks the plugin to shut
// down, stops the process and restarts no more. Instances keep running.
func (g *Group) Shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, g.opts.CallTimeout)
	defer cancel()
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return nil
	}
	g.stopped = true
	c := g.cur
	g.cur = nil
	g.status = "stopped"
	close(g.stop)
	g.mu.Unlock()
	var err error
	if c != nil {
		if err = c.ig.Shutdown(ctx); err != nil {
			err = fmt.Errorf("provider plugin %s: Shutdown: %w", g.opts.Name, err)
		}
		c.client.Kill()
	}
	g.wg.Wait()
	return err
}

func oldestStart(ic *inflightCall) time.Time {
	if ic == nil {
		return time.Now()
	}
	return ic.start
}
