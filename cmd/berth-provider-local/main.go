// Command berth-provider-local is berth's local sandbox provider served as
// an external provider plugin. It exists to run real jobs through the plugin
// path (and as an example of a plugin's main): point berth at it with
//
//	[autoscaler]
//	provider_path = "/path/to/berth-provider-local"
//
// or put it in plugin_dir and set provider = "local-plugin" after renaming
// it berth-provider-local-plugin (the name "local" picks the built-in).
package main

import (
	"log/slog"

	"github.com/berth-ci/berth/provider/local"
	"github.com/berth-ci/berth/sdk"
)

func main() {
	// A sandbox of the local provider is this same binary, re-executed.
	local.RunSandboxIfRequested()
	// The provider keeps the default logger it finds at New: make it the
	// one whose lines reach berth.
	slog.SetDefault(sdk.Logger())
	sdk.Serve(local.New())
}
