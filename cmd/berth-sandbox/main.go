// Command berth-sandbox is the lean binary berth's local provider starts
// its sandboxes from. It links only the sandbox's side of provider/local, so
// every sandbox process skips the package initialisation of everything else
// berth links (etcd, gRPC, the S3 and registry clients, Prometheus, cobra).
//
// Install it beside berth (packaging/release.sh ships both). berth checks at
// start that it is the same build (see `berth-sandbox --build-identity`) and
// owned by root or berth's user, and otherwise starts sandboxes from its own
// binary, as it does when berth-sandbox is absent. It is not meant to be run
// by hand.
package main

import (
	"fmt"
	"os"

	"github.com/berth-ci/berth/provider/local"
)

func main() {
	// Started by berth as a sandbox (or by a sandbox as its image launcher
	// or job root): never returns.
	local.RunSandboxIfRequested()
	if len(os.Args) == 2 && os.Args[1] == local.IdentityArg {
		if err := local.WriteBuildIdentity(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "berth-sandbox:", err)
			os.Exit(1)
		}
		return
	}
	fmt.Fprintln(os.Stderr, "berth-sandbox: berth's local provider starts sandboxes from this binary; it is not meant to be run by hand (`berth-sandbox "+local.IdentityArg+"` prints which build it is)")
	os.Exit(2)
}
