package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
			// Job IDs go on above the old fleet's, and the new fleet's
			// state does not look like the past (issue 43).
			if err := manager.RaiseJobIDs(ctx, cli, *cfg, slog.New(slog.DiscardHandler)); err != nil {
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

// acceptRestoreCmd is `berth state accept-restore`: the explicit act that
// makes an etcd restored from a snapshot the fleet's present again, once
// the managers refused to lead on it (queue.PastError).
func acceptRestoreCmd(cfgFile *string) *cobra.Command {
	return &cobra.Command{
		Use:   "accept-restore",
		Short: "Lead on an etcd restored from a snapshot: fail the jobs it lost, make every instance unknown",
		Long: `Under [ha] every manager remembers the highest job ID it saw (state_dir/queue-last-id).
An etcd restored from a snapshot (or rolled back) whose last job ID is below it holds the
fleet's past: the jobs issued after the snapshot are gone from it, and instances it records
idle may still run them. The managers refuse to lead on it.

With every manager stopped, accept-restore (run it on each manager's host; each knows
its own highest job ID):
  - records the jobs issued after the snapshot as failed, so that their IDs answer and
    are never issued again, and fails the jobs the snapshot holds queued or running
    (they may have run since; a job is never run twice);
  - deletes the state's records of instances, bookings, parked environments and pending
    increases: the next leader finds every instance unknown and resets or replaces it
    before any job (autoscaler.unknown_instances = "delete" deletes them).
Then start the managers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if *cfgFile == "" {
				return errors.New("accept-restore needs --config: the [ha] table names the etcd cluster and key prefix")
			}
			cfg, err := config.Load(*cfgFile)
			if err != nil {
				return err
			}
			if cfg.HA == nil {
				return fmt.Errorf("%s has no [ha] table: accept-restore is for a fleet kept in etcd; for state.db use berth state restore", *cfgFile)
			}
			cli, err := ha.Dial(cfg.HA)
			if err != nil {
				return err
			}
			defer cli.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			done, err := manager.AcceptRestore(ctx, cli, *cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restore accepted: etcd's last job ID was %d, this manager saw %d; %d jobs issued after the snapshot and %d it held queued or running recorded failed; "+
				"%d instance, booking and environment records forgotten (the next leader resets or replaces every instance before any job); run accept-restore on the other managers' hosts, then start the managers\n",
				done.Seq, done.Seen, done.Missing, done.Stale, done.Forgotten)
			return nil
		},
	}
}
