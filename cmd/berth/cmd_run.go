package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

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
			cfg, err := loadConfig(cfgFile, findProvider)
			if err != nil {
				return err
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

			ctx, force, stop := stopSignals(log)
			defer stop()
			m, err := manager.New(ctx, cfg, log, manager.Options{Version: buildinfo.Read().Version, Force: force})
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

// stopSignals turns the first SIGINT or SIGTERM into a graceful stop (ctx is
// canceled: no new jobs, running ones get shutdown_timeout) and the second
// into a forced one (force is closed: running jobs are canceled now), so an
// operator who pressed Ctrl-C once is never stuck for the grace period.
func stopSignals(log *slog.Logger) (ctx context.Context, force <-chan struct{}, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	forced := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			log.Warn("stop signal: stopping gracefully; send it again to cancel running jobs now", "signal", sig.String())
			cancel()
		case <-done:
			return
		}
		select {
		case sig := <-sigs:
			log.Warn("second stop signal: forcing the stop", "signal", sig.String())
			close(forced)
		case <-done:
		}
	}()
	return ctx, forced, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}
