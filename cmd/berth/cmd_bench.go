package main

import "github.com/spf13/cobra"

// TODO(owner of cmd_bench.go): replace this placeholder.
func newBenchCmd() *cobra.Command {
	return &cobra.Command{Use: "bench", Short: "not written yet"}
}
