package main

import (
	"github.com/spf13/cobra"
)

func newLogsCmd() *cobra.Command {
	var (
		conn   connFlags
		follow bool
	)
	cmd := &cobra.Command{
		Use:   "logs ID",
		Short: "Print a job's log (--follow: keep streaming until the job ends)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := interruptContext(cmd)
			defer stop()
			c, err := conn.client()
			if err != nil {
				return err
			}
			err = c.Log(ctx, args[0], follow, cmd.OutOrStdout())
			if err != nil && ctx.Err() != nil {
				// Ctrl-C while following is how people stop reading.
				return nil
			}
			return err
		},
	}
	conn.add(cmd)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "stream the log until the job ends")
	return cmd
}
