// Command berth runs CI jobs on an autoscaled fleet of instances.
//
// See README.md for the quickstart and docs/ for the contract.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/internal/buildinfo"
	"github.com/berth-ci/berth/internal/cloexec"
	"github.com/berth-ci/berth/internal/logging"
	"github.com/berth-ci/berth/provider/local"
	_ "github.com/berth-ci/berth/provider/sim" // registers provider "sim"
)

func main() {
	// A sandbox of the local provider is this same binary, re-executed.
	local.RunSandboxIfRequested()
	// No descriptor berth inherited may reach its plugins or sandboxes.
	_ = cloexec.Inherited()
	root := newRootCmd()
	if cmd, err := root.ExecuteC(); err != nil {
		err = withUsage(cmd, err)
		if _, quiet := err.(exitError); !quiet {
			logging.Exit(os.Stderr, err) // a JSON line when berth run logs JSON
		}
		os.Exit(exitCode(err))
	}
}

// newRootCmd builds the berth command with every subcommand.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "berth",
		Short:         "Run CI jobs on an autoscaled fleet of instances",
		SilenceUsage:  true,
		SilenceErrors: true,
		// berth --version says what berth version does.
		Version: buildinfo.Read().String(),
	}
	root.SetVersionTemplate("berth {{.Version}}\n")
	// Every subcommand inherits it: a mistyped flag gets the closest one.
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		newRunCmd(),
		newSubmitCmd(),
		newJobsCmd(),
		newLogsCmd(),
		newInstancesCmd(),
		newTokenCmd(),
		newBenchCmd(),
		newProviderCmd(),
		newStateCmd(),
		newConfigCmd(),
		&cobra.Command{
			Use:   "version",
			Short: "Print berth's version, commit and the commit's date",
			Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), "berth", buildinfo.Read()) },
		},
	)
	refuseUnknownCommands(root)
	return root
}

// exitCoder is implemented by errors that carry a process exit code, such as
// a job's exit code returned by `berth submit --wait`.
type exitCoder interface{ ExitCode() int }

func exitCode(err error) int {
	if ec, ok := err.(exitCoder); ok {
		return ec.ExitCode()
	}
	return 1
}
