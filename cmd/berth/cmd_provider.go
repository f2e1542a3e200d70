package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/plugin"
	"github.com/berth-ci/berth/providertest"
	"github.com/berth-ci/berth/store"
)

func newProviderCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "provider",
		Short: "Work with provider plugins",
	}
	cmd.AddCommand(newProviderTestCmd())
	return cmd
}

// exitError carries a process exit code without a message of its own.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }
func (e exitError) ExitCode() int { return int(e) }

func newProviderTestCmd() *cobra.Command {
	var (
		config    string
		stateDir  string
		pluginDir string
		timeout   time.Duration
		skipSSH   bool
		verbose   bool
	)
	cmd := &cobra.Command{
		Use:   "test NAME|PATH",
		Short: "Run the provider conformance suite against a provider or plugin binary",
		Long: `Finds the provider as "provider = NAME" in berth.toml does: a built-in
provider (local, sim), else the plugin binary berth-provider-NAME in
--plugin-dir, or next to the berth binary, then on $PATH ("aws" and
"berth-provider-aws" name the same plugin). An argument with a "/" is the
path of a plugin binary (./berth-provider-x for one in this directory).
(The built-in sim reports a delete of an unknown instance as an error, on
purpose, so it fails DecreaseIdempotent; its plugin berth-provider-sim
behaves like a cloud.)

It starts a plugin the way berth does, initialises the provider with
--config (the provider_config as a JSON object), and runs the conformance
suite: it creates two real instances, logs in to them over SSH, checks
heartbeats, suspend/resume, the reset between jobs (Recycle) and readiness
notifications (each when the plugin claims the capability) and deletion, and
deletes everything it created. Each check is printed with PASS, FAIL or
SKIP; the exit code is 0 only when no check failed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, path, g, err := resolveProvider(args[0], pluginDir)
			if err != nil {
				return err
			}
			var obj map[string]any
			if err := json.Unmarshal([]byte(config), &obj); err != nil {
				return fmt.Errorf("--config must be a JSON object (the provider_config), e.g. '{\"region\": \"eu-west-1\"}': %v", err)
			}
			if stateDir == "" {
				if stateDir, err = os.MkdirTemp("", "berth-provider-test"); err != nil {
					return err
				}
				defer os.RemoveAll(stateDir)
			}
			// Host keys a plugin cannot report are trusted on first use, as berth run does.
			st, err := store.Open(filepath.Join(stateDir, "state.db"))
			if err != nil {
				return err
			}
			defer st.Close()
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			out := cmd.OutOrStdout()
			if g == nil {
				pg := plugin.New(plugin.Options{Name: name, Path: path, Logger: log, HostKeys: st, PassMissingHostKeys: skipSSH})
				defer pg.Shutdown(context.Background()) // after a failed Init the suite does not
				g = pg
				fmt.Fprintf(out, "conformance suite for provider plugin %s (%s)\n", name, path)
			} else {
				fmt.Fprintf(out, "conformance suite for built-in provider %s\n", name)
			}
			settings := provider.Settings{Config: json.RawMessage(config), StateDir: filepath.Join(stateDir, "provider", name)}
			results := providertest.Check(context.Background(), g, settings, providertest.Options{Timeout: timeout, SkipSSH: skipSSH},
				func(r providertest.CheckResult) {
					fmt.Fprintf(out, "%-4s  %-20s %v\n", strings.ToUpper(string(r.Status)), r.Name, r.Duration.Round(time.Millisecond))
					for _, m := range r.Messages {
						fmt.Fprintf(out, "      %s\n", strings.ReplaceAll(m, "\n", "\n      "))
					}
				})
			var pass, fail, skip []string
			for _, r := range results {
				switch r.Status {
				case providertest.Pass:
					pass = append(pass, r.Name)
				case providertest.Fail:
					fail = append(fail, r.Name)
				default:
					skip = append(skip, r.Name)
				}
			}
			if len(fail) > 0 {
				fmt.Fprintf(out, "FAILED: %s (%d of %d checks passed, %d skipped)\n", strings.Join(fail, ", "), len(pass), len(results), len(skip))
				return exitError(1)
			}
			fmt.Fprintf(out, "OK: the plugin conforms (%d of %d checks passed, %d skipped)\n", len(pass), len(results), len(skip))
			return nil
		},
	}
	cmd.Flags().StringVar(&config, "config", "{}", "provider_config passed to the plugin, as a JSON object")
	cmd.Flags().StringVar(&pluginDir, "plugin-dir", "", "where berth-provider-NAME is looked for first, as autoscaler.plugin_dir (default: next to berth, then $PATH)")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "directory the plugin may use (default: a temporary directory, removed afterwards)")
	cmd.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "how long to wait for each state change (boot, delete, suspend, resume)")
	cmd.Flags().BoolVar(&skipSSH, "skip-ssh", false, "skip the checks that log in to instances, for simulated providers without SSH servers")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "show the plugin's log lines")
	return cmd
}

// resolveProvider finds what `berth provider test ARG` tests, the way
// berth run finds autoscaler.provider: an argument with a path separator is
// a plugin binary; otherwise a built-in provider of that name (returned as
// g), else the plugin berth-provider-NAME (plugin.Find).
func resolveProvider(arg, pluginDir string) (name, path string, g provider.InstanceGroup, err error) {
	if strings.ContainsRune(arg, filepath.Separator) {
		if path, err = filepath.Abs(arg); err != nil {
			return "", "", nil, err
		}
		if fi, err := os.Stat(path); err != nil || fi.IsDir() {
			return "", "", nil, fmt.Errorf("%s is not a plugin binary: %v", arg, err)
		}
		return plugin.NameOf(path), path, nil, nil
	}
	name = strings.TrimPrefix(arg, plugin.BinaryPrefix)
	if p, err := provider.New(name); err == nil {
		return name, "", p, nil
	}
	path, err = plugin.Find(name, pluginDir)
	if err != nil {
		msg := fmt.Sprintf("%q is not a built-in provider (those are %v) and %v", name, provider.Names(), err)
		if fi, serr := os.Stat(arg); serr == nil && !fi.IsDir() {
			msg += fmt.Sprintf("; to test the file %s in this directory, write ./%s", arg, arg)
		}
		return "", "", nil, errors.New(msg)
	}
	return name, path, nil, nil
}
