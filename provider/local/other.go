//go:build !linux

package local

import (
	"context"
	"errors"

	"github.com/berth-ci/berth/provider"
)

var errUnsupported = errors.New(`local provider: sandboxes need Linux namespaces; on this OS use provider "sim" or an external plugin (a binary named berth-provider-NAME)`)

// Provider is the local sandbox provider. On this OS it refuses to start.
type Provider struct{}

// New returns an uninitialised local provider.
func New() *Provider { return &Provider{} }

// RunSandboxIfRequested does nothing on this OS: no sandboxes are ever started.
func RunSandboxIfRequested() {}

// Init always fails on this OS; the error names providers that work here.
func (p *Provider) Init(context.Context, provider.Settings) (provider.Info, error) {
	return provider.Info{}, errUnsupported
}

// Update fails: see Init.
func (p *Provider) Update(context.Context, func(string, provider.State)) error {
	return errUnsupported
}

// Increase fails: see Init.
func (p *Provider) Increase(context.Context, int) (int, error) { return 0, errUnsupported }

// Decrease fails: see Init.
func (p *Provider) Decrease(context.Context, []string) ([]string, error) {
	return nil, errUnsupported
}

// ConnectInfo fails: see Init.
func (p *Provider) ConnectInfo(context.Context, string) (provider.ConnectInfo, error) {
	return provider.ConnectInfo{}, errUnsupported
}

// Heartbeat fails: see Init.
func (p *Provider) Heartbeat(context.Context, string) error { return errUnsupported }

// Shutdown does nothing.
func (p *Provider) Shutdown(context.Context) error { return nil }
