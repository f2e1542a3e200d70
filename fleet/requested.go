package fleet

import (
	"context"
	"errors"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
)

// settleRestored asks a provider that keeps its requested size
// (provider.RequestedSizer) for it once, right after the first listing
// that worked, so that the core drops the increases restored from the
// store that never reached the provider (scaler.ObserveRequested). A
// failed read is tried again after the next listing; meanwhile the core
// writes them off by itself after scaler.RestoredListingTimeout, as it does
// when the provider cannot say (provider.ErrRequestedSizeUnknown). Only
// update calls it, one listing at a time.
func (f *Fleet) settleRestored(ctx context.Context) {
	rs, ok := f.opts.Provider.(provider.RequestedSizer)
	if !ok || f.sized {
		return
	}
	n, err := rs.RequestedSize(ctx)
	if errors.Is(err, provider.ErrRequestedSizeUnknown) {
		// A plugin without the call, or a wrapper around a provider
		// without it: asking again would get the same answer.
		f.sized = true
		f.log.Debug("the provider does not say what size it was asked for; increases pending from before the restart are settled by the listings", "err", err)
		return
	}
	if err != nil {
		f.log.Warn("cannot read the provider's requested size; increases pending from before the restart are settled by the next listings", "err", err)
		return
	}
	f.sized = true
	_ = f.do(func(c *scaler.Scaler) { c.ObserveRequested(n) })
}
