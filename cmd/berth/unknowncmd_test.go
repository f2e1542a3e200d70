package main

import (
	"strings"
	"testing"

	"github.com/berth-ci/berth/internal/buildinfo"
)

// A word that is no subcommand fails, at every level, with the command to
// type instead; a group alone still prints its help. Cobra alone prints
// the group's help and exits 0 for `berth config chek FILE`.
func TestUnknownCommandsFail(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"config", "chek", "berth.toml"}, `unknown command "chek" for "berth config"; did you mean "berth config check"?`},
		{[]string{"state", "chek"}, `did you mean "berth state check"?`},
		{[]string{"token", "ad", "bob"}, `did you mean "berth token add"?`},
		{[]string{"confg", "check", "x"}, `did you mean "berth config"?`},
		{[]string{"start"}, "berth run starts the daemon"},
		{[]string{"status"}, "GET /healthz"},
		{[]string{"config", "check", "--bogus", "x"}, "unknown flag: --bogus"},
		// berth jobs ID takes a job's ID: a typo of its subcommands is
		// named as one, not asked of the daemon (which is not running).
		{[]string{"jobs", "prun"}, `did you mean "berth jobs prune"?`},
		{[]string{"jobs", "quarantine"}, `did you mean "berth jobs quarantined"?`},
	} {
		_, _, err := runCLI(t, newRootCmd(), "", tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("berth %s: error %v, want one containing %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
	for _, args := range [][]string{{"config"}, {"state"}, {"token"}, {}} {
		out, _, err := runCLI(t, newRootCmd(), "", args...)
		if err != nil || !strings.Contains(out, "Usage:") {
			t.Errorf("berth %s: %v, want its help:\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// berth --version answers as berth version does.
func TestVersionFlag(t *testing.T) {
	out, _, err := runCLI(t, newRootCmd(), "", "--version")
	if want := "berth " + buildinfo.Read().String() + "\n"; err != nil || out != want {
		t.Errorf("berth --version = %q, %v; want %q", out, err, want)
	}
}
