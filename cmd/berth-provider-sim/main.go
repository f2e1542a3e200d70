// Command berth-provider-sim is berth's simulated cloud served as an
// external provider plugin: instances boot, suspend and resume with
// configurable latency and failures but run nothing (they have no SSH
// server). Use it to try the plugin path or a fleet's scaling without
// machines, and `berth provider test --skip-ssh` on it.
package main

import (
	"time"

	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/sdk"
)

func main() {
	sdk.Serve(sim.New(sim.Config{}, time.Now))
}
