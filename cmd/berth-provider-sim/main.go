// Command berth-provider-sim is berth's simulated cloud served as an
// external provider plugin: instances boot, suspend and resume with
// configurable latency and failures but run nothing (they have no SSH
// server). Use it to try the plugin path or a fleet's scaling without
// machines, and `berth provider test --skip-ssh` on it.
package main

import (
	"context"
	"errors"
	"time"

	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/sdk"
)

// group is the simulated cloud with cloud-like deletes: deleting an
// instance that is already gone succeeds, as the conformance suite asks
// (the built-in sim reports it, which its own tests count on).
type group struct{ *sim.Group }

func (g group) Decrease(ctx context.Context, ids []string) ([]string, error) {
	acc, err := g.Group.Decrease(ctx, ids)
	if errors.Is(err, sim.ErrUnknownInstance) {
		err = nil
	}
	return acc, err
}

func main() {
	sdk.Serve(group{sim.New(sim.Config{}, time.Now)})
}
