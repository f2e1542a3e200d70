// Command berth-provider-gcp serves berth's Google Cloud provider (package
// provider/gcp: a Compute Engine managed instance group) as an external
// provider plugin. Install it as berth-provider-gcp next to berth, or name
// it with provider_path, and set provider = "gcp"; see docs/gcp.md.
package main

import (
	"github.com/berth-ci/berth/provider/gcp"
	"github.com/berth-ci/berth/sdk"
)

func main() {
	sdk.Serve(gcp.New())
}
