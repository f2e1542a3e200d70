package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-ci/berth/config"
)

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with berth's config file",
	}
	cmd.AddCommand(newConfigCheckCmd(), newConfigImportCmd(), newConfigReloadCmd())
	return cmd
}

func newConfigCheckCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE",
		Short: "Check a config file without starting berth",
		Long: `Reads FILE as "berth run --config FILE" would and reports every problem
at once, each with its line, the key and what to do: unknown keys (with the
berth name for GitLab Runner's), wrong types and values, a provider that is
neither built in nor a plugin berth can find, provider_config keys the
provider refuses, unreadable token and CA files. Warnings are printed too.
Nothing is started and nothing is written. The exit code is 0 when berth
would start with this file, 1 otherwise.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(args[0], checkProvider)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, w := range cfg.Warnings {
				fmt.Fprintln(out, "warning:", w.String())
			}
			fmt.Fprintf(out, "OK: %s is valid: %s\n", args[0], summary(cfg))
			return nil
		},
	}
}

// loadConfig reads the config berth run uses: the built-in defaults
// without a file, else the file; in both cases the provider is checked
// (built in or a plugin berth can find: check is checkProvider or
// findProvider) along with everything else.
func loadConfig(file string, check config.ProviderCheck) (*config.Config, error) {
	if file == "" {
		cfg := config.Default()
		cfg.SetProviderCheck(check)
		return cfg, nil
	}
	return config.Load(file, config.WithProviderCheck(check))
}

// summary describes what a config will run, in one line.
func summary(cfg *config.Config) string {
	var srcs []string
	for _, s := range cfg.Sources {
		srcs = append(srcs, s.String())
	}
	a := cfg.Autoscaler
	prov := a.Provider
	if a.ProviderPath != "" {
		prov = a.ProviderPath
	}
	return fmt.Sprintf("sources %s; provider %s; up to %d instances of %d slots; listen %s; state %s",
		strings.Join(srcs, ", "), prov, a.MaxInstances, a.CapacityPerInstance, cfg.Listen, cfg.StateDir)
}

func newConfigReloadCmd() *cobra.Command {
	var conn connFlags
	cmd := &cobra.Command{
		Use:   "reload",
		Short: "Make the running berth read its config file again (as SIGHUP does)",
		Long: `Asks the running berth (admin token) to read its config file again and
apply what can change while it runs: the [[autoscaler.policy]] periods,
autoscaler.max_instances, autoscaler.max_use_count and log_level. Running
jobs go on untouched. Settings that changed but take effect only at a
restart (listen, state_dir, the provider and provider_config, sources,
[cache], [images], [ha] and the other autoscaler keys) are named, not
applied. A file with mistakes changes nothing; the answer lists them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := interruptContext(cmd)
			defer stop()
			c, err := conn.client()
			if err != nil {
				return err
			}
			res, err := c.ReloadConfig(ctx)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(res.Applied) == 0 {
				fmt.Fprintln(out, "Reloaded: nothing that can change live has changed.")
			} else {
				fmt.Fprintln(out, "Reloaded; applied:", strings.Join(res.Applied, ", "))
			}
			if len(res.NeedsRestart) > 0 {
				fmt.Fprintln(out, "Changed but applied only at a restart (systemctl restart berth):", strings.Join(res.NeedsRestart, ", "))
			}
			return nil
		},
	}
	conn.add(cmd)
	return cmd
}
