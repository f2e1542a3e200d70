package main

import "github.com/spf13/cobra"

// TODO(owner of cmd_run.go): replace this placeholder.
func newRunCmd() *cobra.Command {
	return &cobra.Command{Use: "run", Short: "not written yet"}
}
