package main

import (
	"context"
	"fmt"
	"log/slog"
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
			opts := manager.Options{Version: buildinfo.Read().Version, Force: force}
			if cfgFile != "" {
				// A reload reads the file as this start did, flags included.
				opts.LoadConfig = func() (*config.Config, error) {
					c, err := loadConfig(cfgFile, findProvider)
					if err != nil {
						return nil, err
					}
					if listen != "" {
						c.Listen = listen
					}
					if stateDir != "" {
						c.StateDir = stateDir
					}
					return c, c.Validate()
				}
			}
			m, err := manager.New(ctx, cfg, log, opts)
			if err != nil {
				return fmt.Errorf("start: %w", err)
			}
			defer reloadOnHangup(log, m, opts.LoadConfig)()
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

// reloadOnHangup reads the config file again on every SIGHUP and applies
// what can change while berth runs (manager.Reload); a file with mistakes
// is logged and changes nothing. The returned func stops listening.
func reloadOnHangup(log *slog.Logger, m *manager.Manager, load func() (*config.Config, error)) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
			case <-done:
				return
			}
			if load == nil {
				log.Warn("SIGHUP: berth runs without a config file, nothing to reload; start it with --config FILE")
				continue
			}
			cfg, err := load()
			if err == nil {
				_, err = m.Reload(cfg)
			}
			if err != nil {
				log.Error("SIGHUP: the config file was not applied; berth runs on with the config it had", "err", err.Error())
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}
