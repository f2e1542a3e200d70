package main

import "github.com/spf13/cobra"

// TODO(owner of cmd_jobs.go): replace this placeholder.
func newJobsCmd() *cobra.Command {
	return &cobra.Command{Use: "jobs", Short: "not written yet"}
}
