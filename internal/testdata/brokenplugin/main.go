// Command brokenplugin is a deliberately broken berth provider plugin for
// tests: a real provider ("base": "sim", the default, or "local") with one
// fault chosen by the "broken" key of its provider_config:
//
//	"list-deleted"  deleted instances stay listed as running (a conformance failure)
//	"bad-state"     Update lists an instance in a state that does not exist
//	"hang-update"   Update never returns
//	"crash-update"  the process exits in the middle of Update
//	"no-host-key"   ConnectInfo reports no host key, as fleeting plugins do; with
//	                sim the address is "ssh_addr" (a test's SSH server)
//
// Anything else, or no key, is the plain provider.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/sdk"
)

type broken struct {
	inner   provider.InstanceGroup
	mode    string
	sshAddr string

	mu      sync.Mutex
	deleted []string
}

func (b *broken) Init(ctx context.Context, s provider.Settings) (provider.Info, error) {
	var cfg map[string]any
	if len(s.Config) > 0 {
		if err := json.Unmarshal(s.Config, &cfg); err != nil {
			return provider.Info{}, err
		}
	}
	b.mode, _ = cfg["broken"].(string)
	b.sshAddr, _ = cfg["ssh_addr"].(string)
	base, _ := cfg["base"].(string)
	delete(cfg, "broken")
	delete(cfg, "ssh_addr")
	delete(cfg, "base")
	rest, _ := json.Marshal(cfg)
	s.Config = rest
	if base == "local" {
		b.inner = local.New()
	} else {
		b.inner = sim.New(sim.Config{BootTime: 50 * time.Millisecond}, time.Now)
	}
	slog.Info("broken plugin initialised", "mode", b.mode, "base", base)
	return b.inner.Init(ctx, s)
}

func (b *broken) Update(ctx context.Context, fn func(string, provider.State)) error {
	switch b.mode {
	case "hang-update":
		<-ctx.Done()
		select {} // ignore the deadline too
	case "crash-update":
		os.Exit(3)
	case "bad-state":
		fn("sim-bogus", provider.State("exploded"))
	}
	listed := map[string]bool{}
	err := b.inner.Update(ctx, func(id string, s provider.State) {
		if s == provider.StateDeleted {
			return
		}
		listed[id] = true
		fn(id, s)
	})
	if b.mode == "list-deleted" {
		b.mu.Lock()
		for _, id := range b.deleted {
			if !listed[id] {
				fn(id, provider.StateRunning)
			}
		}
		b.mu.Unlock()
	}
	return err
}

func (b *broken) Increase(ctx context.Context, n int) (int, error) { return b.inner.Increase(ctx, n) }

func (b *broken) Decrease(ctx context.Context, ids []string) ([]string, error) {
	acc, err := b.inner.Decrease(ctx, ids)
	if errors.Is(err, sim.ErrUnknownInstance) {
		err = nil // already gone: deletes are idempotent, as in berth-provider-sim
	}
	b.mu.Lock()
	b.deleted = append(b.deleted, acc...)
	b.mu.Unlock()
	return acc, err
}

func (b *broken) ConnectInfo(ctx context.Context, id string) (provider.ConnectInfo, error) {
	ci, err := b.inner.ConnectInfo(ctx, id)
	if err == nil && b.mode == "no-host-key" {
		ci.HostKey = ""
		if b.sshAddr != "" {
			ci.Addr = b.sshAddr
		}
	}
	return ci, err
}

func (b *broken) Heartbeat(ctx context.Context, id string) error { return b.inner.Heartbeat(ctx, id) }
func (b *broken) Shutdown(ctx context.Context) error             { return b.inner.Shutdown(ctx) }

func main() {
	local.RunSandboxIfRequested()
	slog.SetDefault(sdk.Logger())
	sdk.Serve(&broken{})
}
