// Command berth-provider-azure serves berth's Azure provider (package
// provider/azure: a virtual machine scale set) as an external provider
// plugin. Install it as berth-provider-azure next to berth, or name it
// with provider_path, and set provider = "azure"; see docs/azure.md.
package main

import (
	"github.com/berth-ci/berth/provider/azure"
	"github.com/berth-ci/berth/sdk"
)

func main() {
	sdk.Serve(azure.New())
}
