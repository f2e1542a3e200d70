package main

import "github.com/spf13/cobra"

// TODO(owner of cmd_submit.go): replace this placeholder.
func newSubmitCmd() *cobra.Command {
	return &cobra.Command{Use: "submit", Short: "not written yet"}
}
