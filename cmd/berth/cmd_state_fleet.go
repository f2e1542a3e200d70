package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/ha"
	"github.com/berth-ci/berth/manager"
)

// newFleetCmd is `berth state new-fleet`: the explicit act that starts a
// new fleet in an etcd that lost the old one's state (ha.IdentityError),
// or makes this host's manager serve the fleet etcd now holds.
func newFleetCmd(cfgFile *string, dir func() (string, error)) *cobra.Command {
	return &cobra.Command{
		Use:   "new-fleet",
		Short: "Start a new fleet on purpose, after etcd (or state.db) lost the old one's state",
		Long: `Under [ha] every manager remembers the identity of its fleet (state_dir/fleet-id)
and refuses to lead while etcd does not hold it: an etcd restarted empty is not a new
fleet (job IDs would repeat, running jobs would share instances with new ones).

Restoring etcd from a snapshot is the first answer. When there is none, new-fleet
makes a new identity in etcd (unless one is there already, made by new-fleet on
another host) and records it in this host's state directory. Run it on every
manager's host, then restart the managers. The instances the old fleet created are
adopted or deleted by autoscaler.unknown_instances; its jobs are gone.

Without [ha] a single manager remembers the identity of its state.db (state_dir/state-id)
and refuses to start when state.db was replaced or is gone; new-fleet forgets it, and
the next start serves the state.db it finds (a new, empty one if none).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := config.Default()
			if *cfgFile != "" {
				var err error
				if cfg, err = config.Load(*cfgFile); err != nil {
					return err
				}
			}
			if cfg.HA == nil {
				d, err := dir()
				if err != nil {
					return err
				}
				if err := os.Remove(filepath.Join(d, manager.StateIDFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "forgot the identity of the old state in %s: the next start serves the state.db it finds (a new one if none)\n", d)
				return nil
			}
			cli, err := ha.Dial(cfg.HA)
			if err != nil {
				return err
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			id, made, err := ha.NewFleet(ctx, cli, cfg.HA.KeyPrefix)
			if err != nil {
				return err
			}
			if err := manager.RecordFleet(cfg.StateDir, manager.FleetIDFile, id); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if made {
				fmt.Fprintf(out, "new fleet %s made in etcd under %q and recorded in %s; restart this manager, and run new-fleet on the other managers' hosts\n", id, cfg.HA.KeyPrefix, cfg.StateDir)
			} else {
				fmt.Fprintf(out, "etcd holds fleet %s under %q: recorded in %s as this manager's fleet; restart this manager\n", id, cfg.HA.KeyPrefix, cfg.StateDir)
			}
			return nil
		},
	}
}
