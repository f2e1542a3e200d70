package plugin

import (
	"context"
	"fmt"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/sdk"
)

// RequestedSize implements provider.RequestedSizer: it asks the plugin how
// many instances its group was asked for, with the call timeout. A plugin
// that does not advertise the capability (one that keeps no such number,
// or predates the call) is not asked: the answer wraps
// sdk.ErrRequestedSizeUnsupported, a provider.ErrRequestedSizeUnknown, and
// the fleet asks no more.
func (g *Group) RequestedSize(ctx context.Context) (int, error) {
	if !g.Info().Capabilities.RequestedSize {
		return 0, fmt.Errorf("provider plugin %s: %w", g.opts.Name, sdk.ErrRequestedSizeUnsupported)
	}
	var n int
	err := g.call(ctx, "RequestedSize", func(ctx context.Context, ig *sdk.Client) error {
		var err error
		n, err = ig.RequestedSize(ctx)
		return err
	})
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("provider plugin %s: RequestedSize answered %d, below zero", g.opts.Name, n)
	}
	return n, nil
}

var _ provider.RequestedSizer = (*Group)(nil)
