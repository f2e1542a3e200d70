package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The docs list every flag of `berth submit`: the contract's row in
// docs/config.md names each one, and docs/cli.md explains each one
// somewhere. (The table once lacked --image, --service, --token-file and
// --raw.)
func TestDocsListEverySubmitFlag(t *testing.T) {
	contract, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for _, line := range strings.Split(string(contract), "\n") {
		if strings.HasPrefix(line, "| `berth submit ") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("docs/config.md has no row for `berth submit`")
	}
	guide, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	newSubmitCmd().Flags().VisitAll(func(f *pflag.Flag) {
		n++
		flag := "--" + f.Name
		if !strings.Contains(row, flag) {
			t.Errorf("docs/config.md's row for berth submit does not list %s (%s)", flag, f.Usage)
		}
		if !strings.Contains(string(guide), flag) {
			t.Errorf("docs/cli.md does not mention %s of berth submit (%s)", flag, f.Usage)
		}
	})
	if n < 10 {
		t.Fatalf("berth submit has only %d flags: did the command change?", n)
	}
}
