package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// A flag's help text with `backticks` makes pflag show the quoted words as
// the value's placeholder ("--state-dir berth run"); none may have spaces.
func TestFlagPlaceholdersAreWords(t *testing.T) {
	cmds := []*cobra.Command{newRunCmd(), newSubmitCmd(), newJobsCmd(), newLogsCmd(), newInstancesCmd(),
		newTokenCmd(), newBenchCmd(), newProviderCmd(), newStateCmd(), newConfigCmd()}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			if name, _ := pflag.UnquoteUsage(f); strings.ContainsAny(name, " `") {
				t.Errorf("%s --%s shows the placeholder %q; drop the backticks from its help", c.CommandPath(), f.Name, name)
			}
		}
		c.Flags().VisitAll(check)
		c.PersistentFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	for _, c := range cmds {
		walk(c)
	}
}
