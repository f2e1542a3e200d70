package manager

import (
	"context"
	"errors"
	"fmt"

	"github.com/berth-ci/berth/provider"
)

// gatedGroup lets a provider call through only while this manager may act
// on the fleet: under [ha], while it leads and etcd confirms it (see
// Manager.mayAct). It guards the calls the manager makes itself, outside
// the fleet: Init, the reset after a job (which may come long after the
// job's term ended), the resets of dead jobs at a takeover, the ready
// hook's connection details. The fleet's own calls (listings, increases,
// deletes, heartbeats, suspends, connection details at acquire) do not
// pass here: the fleet asks the same store right before each of them
// (fleet.confirm), and stops for good once it is refused.
//
// The gate implements every optional interface. That is safe because berth
// asks the provider's Info, not the type, whether it may suspend or
// recycle (a plugin group has the methods whatever its plugin can do); an
// unsupported call fails like the provider's own would.
type gatedGroup struct {
	g     provider.InstanceGroup
	allow func(ctx context.Context) error
}

// errNotSupported is a call to an optional method the provider lacks.
var errNotSupported = errors.New("the provider does not support this call")

func gate(g provider.InstanceGroup, allow func(ctx context.Context) error) *gatedGroup {
	return &gatedGroup{g: g, allow: allow}
}

func (p *gatedGroup) check(ctx context.Context, call string) error {
	if err := p.allow(ctx); err != nil {
		return fmt.Errorf("provider %s not sent: %w", call, err)
	}
	return nil
}

func (p *gatedGroup) Init(ctx context.Context, s provider.Settings) (provider.Info, error) {
	if err := p.check(ctx, "Init"); err != nil {
		return provider.Info{}, err
	}
	return p.g.Init(ctx, s)
}

func (p *gatedGroup) Update(ctx context.Context, fn func(id string, s provider.State)) error {
	if err := p.check(ctx, "Update"); err != nil {
		return err
	}
	return p.g.Update(ctx, fn)
}

func (p *gatedGroup) Increase(ctx context.Context, n int) (int, error) {
	if err := p.check(ctx, "Increase"); err != nil {
		return 0, err
	}
	return p.g.Increase(ctx, n)
}

func (p *gatedGroup) Decrease(ctx context.Context, ids []string) ([]string, error) {
	if err := p.check(ctx, "Decrease"); err != nil {
		return nil, err
	}
	return p.g.Decrease(ctx, ids)
}

func (p *gatedGroup) ConnectInfo(ctx context.Context, id string) (provider.ConnectInfo, error) {
	if err := p.check(ctx, "ConnectInfo"); err != nil {
		return provider.ConnectInfo{}, err
	}
	return p.g.ConnectInfo(ctx, id)
}

func (p *gatedGroup) Heartbeat(ctx context.Context, id string) error {
	if err := p.check(ctx, "Heartbeat"); err != nil {
		return err
	}
	return p.g.Heartbeat(ctx, id)
}

// Shutdown always passes: it releases berth's side (a plugin process, a
// watcher) and leaves the instances alone.
func (p *gatedGroup) Shutdown(ctx context.Context) error { return p.g.Shutdown(ctx) }

func (p *gatedGroup) Suspend(ctx context.Context, ids []string) ([]string, error) {
	s, ok := p.g.(provider.Suspender)
	if !ok {
		return nil, errNotSupported
	}
	if err := p.check(ctx, "Suspend"); err != nil {
		return nil, err
	}
	return s.Suspend(ctx, ids)
}

func (p *gatedGroup) Resume(ctx context.Context, ids []string) ([]string, error) {
	s, ok := p.g.(provider.Suspender)
	if !ok {
		return nil, errNotSupported
	}
	if err := p.check(ctx, "Resume"); err != nil {
		return nil, err
	}
	return s.Resume(ctx, ids)
}

func (p *gatedGroup) Recycle(ctx context.Context, id string) error {
	r, ok := p.g.(provider.Recycler)
	if !ok {
		return errNotSupported
	}
	if err := p.check(ctx, "Recycle"); err != nil {
		return err
	}
	return r.Recycle(ctx, id)
}

// Notify is a hint that only makes berth list the group, and the listing
// goes through the gate: it passes.
func (p *gatedGroup) Notify(fn func(id string, s provider.State)) {
	if n, ok := p.g.(provider.Notifier); ok {
		n.Notify(fn)
	}
}
