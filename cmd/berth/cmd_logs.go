package main

import (
	"github.com/spf13/cobra"
)

func newLogsCmd() *cobra.Command {
	var (
		conn   connFlags
		follow bool
		raw    bool
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
			out := cmd.OutOrStdout()
			if !raw {
				// A job's output must not drive the reader's terminal.
				out = &terminalSafe{w: out}
			}
			err = c.Log(ctx, args[0], follow, out)
			if err != nil && ctx.Err() != nil {
				// Ctrl-C while following is how people stop reading.
				return nil
			}
			return err
		},
	}
	conn.add(cmd)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "stream the log until the job ends")
	cmd.Flags().BoolVar(&raw, "raw", false, "print the log byte for byte, terminal escape sequences included (by default only colours pass)")
	return cmd
}
