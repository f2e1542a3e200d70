package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/config"
)

// newPruneCmd is `berth jobs prune`: delete old finished jobs and logs of
// the built-in queue now, as the daemon does every hour by job_retention
// and log_retention.
func newPruneCmd() *cobra.Command {
	var (
		conn             connFlags
		asJSON           bool
		jobsOlder, logsO time.Duration
	)
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Delete finished jobs and logs older than the given ages (admin)",
		Long: `Delete the finished jobs of the built-in queue that ended more than
--older-than ago, with their logs, and the logs of finished jobs that ended
more than --logs-older-than ago. Queued and running jobs are never deleted,
and IDs of deleted jobs are never given again. berth does this every hour by
job_retention and log_retention; this command does it now. 0 leaves that kind
alone.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := interruptContext(cmd)
			defer stop()
			c, err := conn.client()
			if err != nil {
				return err
			}
			res, err := c.Prune(ctx, jobsOlder, logsO)
			if err != nil {
				return err
			}
			if asJSON {
				return jsonOut(cmd.OutOrStdout(), res)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %d finished job(s) with their logs, and %d more log(s)\n", res.Jobs, res.Logs)
			return nil
		},
	}
	conn.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for machines")
	cmd.Flags().DurationVar(&jobsOlder, "older-than", config.DefaultJobRetention, "delete finished jobs that ended longer ago than this, with their logs")
	cmd.Flags().DurationVar(&logsO, "logs-older-than", config.DefaultLogRetention, "delete the logs of finished jobs that ended longer ago than this")
	return cmd
}
