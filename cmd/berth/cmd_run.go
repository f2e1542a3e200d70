package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/internal/buildinfo"
	"github.com/berth-ci/berth/internal/logging"
	"github.com/berth-ci/berth/manager"
)

func newRunCmd() *cobra.Command {
	var (
		cfgFile  string
		listen   string
		stateDir string
	)
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the berth daemon (local provider and built-in queue when there is no config)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.Default()
			cfg.SetProviderCheck(checkProvider)
			if cfgFile != "" {
				var err error
				if cfg, err = config.Load(cfgFile, config.WithProviderCheck(checkProvider)); err != nil {
					return err
				}
			}
			if listen != "" {
				cfg.Listen = listen
			}
			if stateDir != "" {
				cfg.StateDir = stateDir
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			// Every line goes through one handler: the local provider
			// and other code that takes slog.Default, the sandboxes
			// (through their environment) and re-logged plugin lines.
			log, err := logging.Setup(os.Stderr, logging.Settings{Level: cfg.LogLevel, Format: cfg.LogFormat})
			if err != nil {
				return err
			}

			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			m, err := manager.New(ctx, cfg, log, manager.Options{Version: buildinfo.Read().Version})
			if err != nil {
				return fmt.Errorf("start: %w", err)
			}
			return m.Run(ctx)
		},
	}
	cmd.Flags().StringVar(&cfgFile, "config", "", "TOML config file (default: none, built-in defaults)")
	cmd.Flags().StringVar(&listen, "listen", "", "address of the HTTP API (default 127.0.0.1:8765)")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "directory for berth's state (default ~/.local/state/berth)")
	return cmd
}
