package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/config/runnerimport"
)

func newConfigImportCmd() *cobra.Command {
	var runner, tokenDir string
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Turn gitlab-runner's config.toml into a berth.toml",
		Long: `Reads gitlab-runner's config.toml (docker-autoscaler, instance and
docker+machine runners) and prints the berth.toml doing the same on stdout:
each [[runners]] becomes a [[source]], [runners.autoscaler] (or
[runners.machine]) the [autoscaler] with its policies, plugin_config and
connector_config the provider's provider_config, [runners.cache.s3] the
[cache]. Every setting berth does not take is kept as a comment saying why
and what to do instead.

Runner tokens never reach the output: each is written to its own file
(mode 0600) in --token-dir, which the source names with token_file. An
existing token file is kept when it holds the same token, else the import
stops.

berth scales one fleet per process. Runners with the same autoscaler become
sources of one berth; the others are listed at the end: import each with
--runner NAME into a second file and run a second berth with its own
listen and state_dir.`,
		Example: `  berth config import /etc/gitlab-runner/config.toml --token-dir /var/lib/berth > berth.toml
  berth config check berth.toml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return fmt.Errorf("read %s: %w; give gitlab-runner's config.toml", args[0], err)
			}
			dir, err := filepath.Abs(tokenDir)
			if err != nil {
				return err
			}
			res, err := runnerimport.Import(data, args[0], runnerimport.Options{Runner: runner, TokenDir: dir})
			if err != nil {
				return err
			}
			for _, tf := range res.Tokens {
				if err := writeTokenFile(tf.Path, tf.Token); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "berth: wrote the token of runner %q to %s\n", tf.Runner, tf.Path)
			}
			for _, n := range res.Notes {
				fmt.Fprintln(cmd.ErrOrStderr(), "berth:", n)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), res.TOML)
			return err
		},
	}
	cmd.Flags().StringVar(&runner, "runner", "", "the runner (by name) whose autoscaler to import; default the first")
	cmd.Flags().StringVar(&tokenDir, "token-dir", ".", "where to write the runners' token files (not under /etc: jobs of the local provider see /etc)")
	return cmd
}

// writeTokenFile writes token to path, readable by this user only. A file
// already there is left alone when it holds the same token (an import run
// twice), and is an error otherwise: it may be another runner's.
func writeTokenFile(path, token string) error {
	data := []byte(token + "\n")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		old, rerr := os.ReadFile(path)
		if rerr == nil && bytes.Equal(bytes.TrimSpace(old), []byte(token)) {
			return nil
		}
		return fmt.Errorf("token file %s exists and holds another token; remove it or pass --token-dir", path)
	}
	if err != nil {
		return fmt.Errorf("write token file: %w; pass a --token-dir you may write to", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write token file %s: %w", path, err)
	}
	return f.Close()
}
