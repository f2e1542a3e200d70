package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/sdk"
)

// Notify implements provider.Notifier. When the plugin claims the notify
// capability, a non-nil fn opens the plugin's notification stream (Watch),
// which is opened again after the plugin restarts or the stream breaks;
// nil closes it. A plugin without the capability never calls fn: berth
// learns states from its listings, exactly as with a built-in provider
// that is no Notifier. Notifications are hints, so a lost stream costs
// latency only, and each one is checked before fn sees it.
func (g *Group) Notify(fn func(id string, s provider.State)) {
	g.notifyMu.Lock()
	g.notifyFn = fn
	g.notifyMu.Unlock()

	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopWatch != nil {
		g.stopWatch()
		g.stopWatch = nil
	}
	switch {
	case fn == nil || g.stopped:
		return
	case !g.info.Capabilities.Notify:
		g.log.Info("provider plugin does not report state changes; berth learns them from its periodic listings")
		return
	}
	g.log.Info("opening the provider plugin's notification stream; berth lists at once when an instance becomes running")
	ctx, cancel := context.WithCancel(context.Background())
	g.stopWatch = cancel
	g.wg.Add(1) // under mu, so Shutdown's Wait sees it
	go g.watchLoop(ctx)
}

// deliver passes one notification from the plugin to the registered
// function, if any.
func (g *Group) deliver(id string, s provider.State) {
	if id == "" || !s.Valid() {
		g.log.Warn("provider plugin sent an invalid notification; ignored", "id", id, "state", s)
		return
	}
	g.notifyMu.Lock()
	defer g.notifyMu.Unlock()
	if g.notifyFn != nil {
		g.notifyFn(id, s)
	}
}

// watchLoop keeps a notification stream open until ctx is done or Shutdown.
// It follows the plugin through restarts: g.conn waits for the restarted
// process, and a stream that broke is opened again after a short pause
// that grows while it keeps breaking.
func (g *Group) watchLoop(ctx context.Context) {
	defer g.wg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-g.stop: // Shutdown ends the stream too
			cancel()
		case <-ctx.Done():
		}
	}()
	pause := g.opts.MinBackoff
	for ctx.Err() == nil {
		c, err := g.conn(ctx)
		if err != nil {
			return // stopped, or ctx done
		}
		opened := time.Now()
		err = c.ig.Watch(ctx, func(id string, s provider.State) {
			pause = g.opts.MinBackoff
			g.deliver(id, s)
		})
		switch {
		case err == nil || ctx.Err() != nil:
			return
		case errors.Is(err, sdk.ErrNotifyUnsupported):
			g.log.Warn("provider plugin claims the notify capability but does not serve Watch; berth learns states from its listings", "err", err)
			return
		}
		if time.Since(opened) > time.Minute {
			pause = g.opts.MinBackoff
		}
		g.log.Debug("provider plugin notification stream ended; opening it again", "err", err, "in", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// Recycle implements provider.Recycler: it asks the plugin to reset the
// instance, with the call timeout. A plugin without the recycle capability
// is not asked; the answer wraps sdk.ErrRecycleUnsupported. The manager
// looks at Info.Capabilities.Recycle first and never calls it then.
func (g *Group) Recycle(ctx context.Context, id string) error {
	if !g.Info().Capabilities.Recycle {
		return fmt.Errorf("provider plugin %s: %w", g.opts.Name, sdk.ErrRecycleUnsupported)
	}
	return g.call(ctx, "Recycle", func(ctx context.Context, ig *sdk.Client) error { return ig.Recycle(ctx, id) })
}

var (
	_ provider.Notifier = (*Group)(nil)
	_ provider.Recycler = (*Group)(nil)
)
