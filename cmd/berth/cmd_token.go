package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/api"
)

func newTokenCmd() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage API tokens of submitters (files in the state directory)",
		Long: `Manage the API tokens of submitters. Run it as the user that runs ` + "`berth run`" + `;
it works on the state directory's files, and a running berth picks up changes at once.

The admin token is <state_dir>/api-token (created by berth run). Each submitter
has its own token in <state_dir>/api-tokens/NAME and sees, cancels and resumes
only its own jobs and environments.`,
		Example: `  berth token add alice        # prints alice's token once; give it to her
  berth token list
  berth token remove alice     # revokes it at once`,
	}
	cmd.PersistentFlags().StringVar(&stateDir, "state-dir", "", "berth's state directory (default $"+stateDirEnv+", else ~/.local/state/berth when berth ran there, else "+installedStateDir+" when readable)")
	dir := func() string {
		if stateDir != "" {
			return stateDir
		}
		return localStateDir()
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "add NAME",
		Short: "Create a token for submitter NAME and print it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := api.AddSubmitter(dir(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			fmt.Fprintf(cmd.ErrOrStderr(), "berth: token of %s written to %s; %s passes it with --token or $%s\n", args[0], api.SubmitterPath(dir(), args[0]), args[0], api.TokenEnv)
			return nil
		},
	}, &cobra.Command{
		Use:   "list",
		Short: "List the submitters that have a token (not the tokens)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			entries, err := os.ReadDir(filepath.Join(dir(), api.TokensDirName))
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s\t%s\n", api.AdminName, api.TokenPath(dir()))
			var names []string
			for _, e := range entries {
				if api.ValidSubmitterName(e.Name()) {
					names = append(names, e.Name())
				}
			}
			sort.Strings(names)
			for _, n := range names {
				fmt.Fprintf(out, "%s\t%s\n", n, api.SubmitterPath(dir(), n))
			}
			return nil
		},
	}, &cobra.Command{
		Use:   "remove NAME",
		Short: "Revoke submitter NAME's token",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !api.ValidSubmitterName(args[0]) {
				return fmt.Errorf("%q is not a submitter name; the admin token is %s (replace it by removing the file and restarting berth)", args[0], api.TokenPath(dir()))
			}
			if err := os.Remove(api.SubmitterPath(dir(), args[0])); err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("submitter %s has no token in %s: see `berth token list`", args[0], filepath.Join(dir(), api.TokensDirName))
				}
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "berth: token of %s revoked\n", args[0])
			return nil
		},
	})
	return cmd
}
