package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// refuseUnknownCommands makes every command group (berth, berth config,
// berth state, berth token, ...) refuse a word that is none of its
// subcommands, with the closest one. Cobra prints a group's help and exits
// 0 for `berth config chek FILE`, so `berth config chek x && systemctl
// restart berth` would restart unchecked.
func refuseUnknownCommands(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2 // cobra's default, set only on its own path
		}
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		}
	}
	for _, sub := range c.Commands() {
		refuseUnknownCommands(sub)
	}
}

// commandHints answer words people type from other tools' habits, which
// name no berth command and are not a typo of one.
var commandHints = map[string]string{
	"start":    "berth run starts the daemon (installed as a service: systemctl start berth)",
	"serve":    "berth run starts the daemon",
	"daemon":   "berth run starts the daemon",
	"status":   "the daemon's health is GET /healthz (curl http://127.0.0.1:8765/healthz); berth instances and berth jobs show the fleet and the jobs",
	"health":   "the daemon's health is GET /healthz (curl http://127.0.0.1:8765/healthz)",
	"stop":     "berth run stops on SIGTERM or Ctrl-C (installed as a service: systemctl stop berth)",
	"register": "berth takes a GitLab runner's token directly: create the runner in GitLab and put its glrt- token in the source's token_file (docs/use-gitlab.md)",
	"verify":   "berth config check FILE checks a config, GitLab tokens included when berth starts",
}

func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if h, ok := commandHints[strings.ToLower(name)]; ok && !cmd.HasParent() {
		msg += ": " + h
	} else if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", cmd.CommandPath()+" "+s[0])
	}
	return fmt.Errorf("%s (%s --help lists the commands)", msg, cmd.CommandPath())
}
