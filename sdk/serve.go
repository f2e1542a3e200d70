package sdk

import (
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// Serve serves g as a berth provider plugin and returns when berth is done
// with it. Call it from main, after building g. If the binary is run by hand
// rather than by berth, Serve prints an explanation and exits with status 1.
//
// Serve makes Logger the default slog logger, so slog calls reach berth's
// log. A group that keeps a logger it took from slog.Default before Serve
// should take Logger() instead.
func Serve(g InstanceGroup) {
	log := Logger()
	slog.SetDefault(log)
	go exitWithParent(os.Getppid())
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: PluginSets(g),
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name: "go-plugin", Level: hclog.Warn, Output: os.Stderr, JSONFormat: true,
		}),
	})
}

// exitWithParent ends the plugin when berth dies without stopping it (kill
// -9): a plugin left behind would hold the group's state directory while the
// next berth starts a new one on it.
func exitWithParent(ppid int) {
	for range time.Tick(time.Second) {
		if os.Getppid() != ppid {
			slog.Warn("berth went away; plugin exits")
			os.Exit(0)
		}
	}
}

// Logger returns a logger that writes JSON lines to the plugin's stderr in
// the form berth (and go-plugin's hclog) reads: "@level", "@message",
// "@timestamp" and one key per attribute.
func Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				return slog.String("@timestamp", a.Value.Time().Format("2006-01-02T15:04:05.000000Z07:00"))
			case slog.LevelKey:
				return slog.String("@level", strings.ToLower(a.Value.String()))
			case slog.MessageKey:
				return slog.String("@message", a.Value.String())
			}
			return a
		},
	}))
}
