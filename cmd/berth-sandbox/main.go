// Command berth-sandbox is the lean binary berth's local provider starts
// its sandboxes from. It links only provider/local and what that imports,
// so every sandbox process (PID 1, the image launcher, the job roots) skips
// the package initialisation of everything else berth links (etcd, gRPC,
// the S3 client, Prometheus, cobra).
//
// Install it beside berth (packaging/release.sh ships both). berth checks at
// start that it is owned by root or berth's user, not writable by others,
// and the same build (BERTH_SANDBOX_IDENTITY=1 berth-sandbox prints which
// build it is); otherwise it starts sandboxes from its own binary, as it
// does when berth-sandbox is absent. It is not meant to be run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/berth-ci/berth/provider/local"
)

func main() {
	// Started by berth as a sandbox (or by a sandbox as its image launcher
	// or job root), or asked for its build identity: never returns.
	local.RunSandboxIfRequested()
	fmt.Fprintln(os.Stderr, "berth-sandbox: berth's local provider starts sandboxes from this binary; it is not meant to be run by hand ("+local.IdentityEnv+"=1 berth-sandbox prints which build it is)")
	os.Exit(2)
}
