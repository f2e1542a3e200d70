package main

import "github.com/spf13/cobra"

// TODO(owner of cmd_instances.go): replace this placeholder.
func newInstancesCmd() *cobra.Command {
	return &cobra.Command{Use: "instances", Short: "not written yet"}
}
