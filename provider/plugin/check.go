package plugin

import (
	"context"
	"log/slog"
	"time"
)

// CheckConfig starts the plugin at path, asks it to check raw as its
// provider_config (sdk.Client.CheckConfig: no cloud call, nothing written),
// and stops it. The error is nil when the plugin accepts the config,
// sdk.ErrCheckUnsupported when the plugin cannot check before it starts
// (one built before the check existed), *provider.ConfigError values
// joined for the problems it found, or why the plugin could not be asked.
func CheckConfig(ctx context.Context, path string, raw []byte, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	const timeout = 30 * time.Second // a check computes; it waits for nothing
	client, _, ig, err := launch(path, log, timeout)
	if err != nil {
		return err
	}
	defer client.Kill()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return ig.CheckConfig(ctx, raw)
}
