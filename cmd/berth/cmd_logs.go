package main

import "github.com/spf13/cobra"

// TODO(owner of cmd_logs.go): replace this placeholder.
func newLogsCmd() *cobra.Command {
	return &cobra.Command{Use: "logs", Short: "not written yet"}
}
