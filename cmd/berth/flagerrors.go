package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagError turns pflag's "unknown flag: --wiat" into an error that says
// what to type instead: the closest flag the command has, or for submit,
// that a script's own flags go after "--". Cobra suggests mistyped
// commands by itself, but not flags.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	name, short := "", false
	switch {
	case strings.HasPrefix(msg, "unknown flag: --"):
		name = strings.TrimPrefix(msg, "unknown flag: --")
	case strings.HasPrefix(msg, "unknown shorthand flag: '"):
		// "unknown shorthand flag: 'w' in -w"; in "-j4" the j is not
		// a flag the user typed alone, so nothing is suggested for it.
		letter, in, _ := strings.Cut(strings.TrimPrefix(msg, "unknown shorthand flag: '"), "' in -")
		if in == letter {
			name, short = letter, true
		}
	default:
		return fmt.Errorf("%w (see %s --help)", err, cmd.CommandPath())
	}
	help := " (" + cmd.CommandPath() + " --help lists the flags)"
	if s := closestFlag(cmd, name, short); name != "" && s != "" {
		return fmt.Errorf("%s; did you mean %s?%s", msg, s, help)
	}
	if cmd.Name() == "submit" {
		return fmt.Errorf("%s; if it is the script's, put -- before the script, e.g. berth submit --wait -- 'make -j4 test'%s", msg, help)
	}
	return fmt.Errorf("%s%s", msg, help)
}

// argCountRE matches cobra's argument-count errors ("accepts 1 arg(s),
// received 0"), which do not say what the arguments are.
var argCountRE = regexp.MustCompile(`^(accepts|requires|accepts between|received) .*arg\(s\)`)

// withUsage adds the command's usage line to an argument-count error, so
// that `berth logs` says it wants a job ID.
func withUsage(cmd *cobra.Command, err error) error {
	if cmd == nil || !argCountRE.MatchString(err.Error()) {
		return err
	}
	return fmt.Errorf("%w; usage: %s (%s --help says more)", err, cmd.UseLine(), cmd.CommandPath())
}

// closestFlag returns the flag of cmd (its own and inherited) whose name is
// nearest to name, written as the user would write it, or "" when none is
// close enough to be what they meant.
func closestFlag(cmd *cobra.Command, name string, short bool) string {
	best, bestDist := "", 0
	visit := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		cand, typed := f.Name, name
		if short {
			// -w for --wait: a shorthand the command lacks may be the
			// first letter of a long flag.
			if f.Shorthand == "" && len(typed) == 1 && strings.HasPrefix(cand, typed) && best == "" {
				best, bestDist = "--"+cand, len(cand)
			}
			return
		}
		d := editDistance(typed, cand)
		if strings.HasPrefix(cand, typed) && len(typed) >= 2 {
			d = min(d, 1)
		}
		if d <= max(1, len(cand)/3) && (best == "" || d < bestDist) {
			best, bestDist = "--"+cand, d
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	return best
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment) of a and b: insertions, deletions, substitutions and swaps of
// neighbours each cost 1, so "wiat" is 1 from "wait".
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
