package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/ha"
	"github.com/berth-ci/berth/manager"
)

// newFleetCmd is `berth state new-fleet`: the explicit act that starts a
// new fleet in an etcd that lost the old one's state (ha.IdentityError),
// or makes this host's manager serve the fleet etcd now holds.
func newFleetCmd(cfgFile *string) *cobra.Command {
	return &cobra.Command{
		Use:   "new-fleet",
		Short: "Start a new fleet in etcd on purpose, after etcd lost the old one's state ([ha] only)",
		Long: `Under [ha] every manager remembers the identity of its fleet (state_dir/fleet-id)
and refuses to lead while etcd does not hold it: an etcd restarted empty is not a new
fleet (job IDs would repeat, running jobs would share instances with new ones).

Restoring etcd from a snapshot is the first answer. When there is none, new-fleet
makes a new identity in etcd (unless one is there already, made by new-fleet on
another host) and records it in this host's state directory. Run it on every
manager's host, then restart the managers. The instances the old fleet created are
adopted or deleted by autoscaler.unknown_instances; its jobs are gone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if *cfgFile == "" {
				return errors.New("new-fleet needs --config: the file with the [ha] table of the managers")
			}
			cfg, err := config.Load(*cfgFile)
			if err != nil {
				return err
			}
			if cfg.HA == nil {
				return fmt.Errorf("%s has no [ha] table: without it the fleet's state is state.db, whose identity is its own", *cfgFile)
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
			if err := manager.RecordFleet(cfg.StateDir, id); err != nil {
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
