package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/internal/boltfile"
	"github.com/berth-ci/berth/jobsource/queue"
	"github.com/berth-ci/berth/store"
)

// stateFiles are berth's bbolt files, relative to the state directory.
var stateFiles = []string{"state.db", filepath.Join("queue", "queue.db")}

// recordChecks decode each file's records, so that check and restore see
// a damaged record as damage (issue 19), not only a damaged page.
var recordChecks = map[string]boltfile.RecordCheck{
	"state.db":                         store.CheckRecord,
	filepath.Join("queue", "queue.db"): queue.CheckRecord,
}

func newStateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "state",
		Short: "Check berth's state files, or restore them from their last good copy",
		Long: `berth keeps its durable state in two bbolt files under the state directory:
state.db (instances, bookings, parked environments) and queue/queue.db (jobs).
Next to each it keeps the last good copy (state.db.bak, queue/queue.db.bak),
written at start once the file passed its check, every few minutes while
berth runs, and at a clean stop.

A damaged file makes ` + "`berth run`" + ` refuse to start, without writing to it.
` + "`berth state check`" + ` says what is wrong with each file; ` + "`berth state restore`" + `
(with berth stopped) puts back the last good copy of each damaged file and
keeps the damaged one as FILE.damaged-TIME.`,
	}
	var cfgFile, stateDir string
	dir := func() (string, error) {
		if stateDir != "" {
			return stateDir, nil
		}
		cfg := config.Default()
		if cfgFile != "" {
			var err error
			if cfg, err = config.Load(cfgFile); err != nil {
				return "", err
			}
		}
		return cfg.StateDir, nil
	}
	cmd.PersistentFlags().StringVar(&cfgFile, "config", "", "TOML config file whose state_dir to use")
	cmd.PersistentFlags().StringVar(&stateDir, "state-dir", "", "state directory (default: the config's, else ~/.local/state/berth)")

	cmd.AddCommand(&cobra.Command{
		Use:   "check",
		Short: "Check every state file and its last good copy without writing to them",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := dir()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			bad := 0
			for _, f := range stateFiles {
				for _, p := range []string{filepath.Join(d, f), filepath.Join(d, f) + boltfile.BackupSuffix} {
					err := boltfile.Check(p, recordChecks[f])
					var ce *boltfile.CorruptError
					switch {
					case err == nil && !exists(p):
						fmt.Fprintf(out, "missing  %s\n", p)
					case err == nil:
						fmt.Fprintf(out, "ok       %s\n", p)
					case errors.Is(err, boltfile.ErrLocked):
						fmt.Fprintf(out, "in use   %s (a running berth holds it; it passed the check when berth opened it)\n", p)
					case errors.As(err, &ce) && len(ce.Records) > 0:
						bad++
						fmt.Fprintf(out, "DAMAGED  %s: its structure is sound, but %d record(s) are damaged:\n", p, len(ce.Records))
						for _, r := range ce.Records {
							fmt.Fprintf(out, "         bucket %s, key %s: %v\n", r.Bucket, r.Key, r.Err)
						}
					case errors.As(err, &ce):
						bad++
						fmt.Fprintf(out, "DAMAGED  %s: %s\n", p, ce.Problem)
					default:
						bad++
						fmt.Fprintf(out, "ERROR    %v\n", err)
					}
				}
			}
			held := reportQuarantined(out, d)
			if bad == 0 && held > 0 {
				return fmt.Errorf("%d job(s) quarantined; with berth stopped, `berth state restore-job --state-dir %s ID` puts one back from its kept copy", held, d)
			}
			if bad > 0 {
				return fmt.Errorf("%d file(s) damaged; with berth stopped, `berth state restore --state-dir %s` puts back the last good copy of each damaged file, or move a damaged file aside to start without it", bad, d)
			}
			return nil
		},
	})
	cmd.AddCommand(&cobra.Command{
		Use:   "restore",
		Short: "Replace each damaged state file with its last good copy (berth must be stopped)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			d, err := dir()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			restored := 0
			for _, f := range stateFiles {
				p := filepath.Join(d, f)
				switch err := boltfile.Check(p, recordChecks[f]); {
				case err == nil && exists(p):
					fmt.Fprintf(out, "ok        %s (nothing to do)\n", p)
					continue
				case err == nil && !exists(p+boltfile.BackupSuffix):
					fmt.Fprintf(out, "missing   %s, and it has no copy (berth starts it empty)\n", p)
					continue
				case errors.Is(err, boltfile.ErrLocked):
					return fmt.Errorf("%s is held by a running berth: stop it first", p)
				}
				aside, err := boltfile.Restore(p, recordChecks[f])
				if err != nil {
					return err
				}
				restored++
				fmt.Fprintf(out, "restored  %s from %s (the damaged file is kept as %s)\n", p, filepath.Base(p)+boltfile.BackupSuffix, orNone(aside))
			}
			if restored > 0 {
				fmt.Fprintln(out, "changes made since the copy was written are lost: jobs queued after it are gone, and instances created after it are adopted or deleted by autoscaler.unknown_instances")
			}
			return nil
		},
	})
	cmd.AddCommand(newFleetCmd(&cfgFile, dir))
	cmd.AddCommand(acceptRestoreCmd(&cfgFile))
	cmd.AddCommand(newRestoreJobCmd(dir))
	return cmd
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func orNone(s string) string {
	if s == "" {
		return "nothing: it was missing"
	}
	return s
}
