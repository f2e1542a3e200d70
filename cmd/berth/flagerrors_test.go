package main

import (
	"os/exec"
	"strings"
	"testing"
)

// A new user's slips at the command line get an answer that says what to
// type: a submit without a script, a mistyped flag, a script's own flag
// without "--" before it. Nothing is queued (no server is even asked).
func TestCommandLineSlipsSayWhatToType(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"submit"}, []string{"no script to run", "berth submit --wait -- 'echo hello", "berth submit --wait - < ci.sh"}},
		{[]string{"submit", "--wait"}, []string{"no script to run"}},
		{[]string{"submit", "--wiat", "--", "make test"}, []string{"unknown flag: --wiat; did you mean --wait?"}},
		{[]string{"submit", "--imgae", "golang", "--", "go version"}, []string{"did you mean --image?"}},
		{[]string{"submit", "--token-flie", "t", "--", "true"}, []string{"did you mean --token-file?"}},
		{[]string{"submit", "make", "-j4"}, []string{"put -- before the script"}},
		{[]string{"jobs", "--jsno"}, []string{"did you mean --json?", "berth jobs --help"}},
		{[]string{"run", "--cofnig", "x.toml"}, []string{"did you mean --config?"}},
		{[]string{"logs"}, []string{"usage: berth logs ID"}},
		{[]string{"token", "add"}, []string{"usage: berth token add NAME"}},
	} {
		cmd := exec.Command(berthBin, tc.args...)
		cmd.Env = append(cmd.Environ(), "BERTH_SERVER=http://127.0.0.1:1") // nothing listens: a slip must not get that far
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
			t.Errorf("berth %v: %v, want a failure\n%s", tc.args, err, out)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("berth %v says %q; want it to contain %q", tc.args, out, w)
			}
		}
		if strings.Contains(string(out), "requires at least") || strings.Contains(string(out), "connection refused") {
			t.Errorf("berth %v: %q", tc.args, out)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"wiat", "wait", 1}, {"wait", "wait", 0}, {"imgae", "image", 1}, {"sever", "server", 1}, {"x", "json", 4}, {"", "abc", 3}} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
