package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestAzureWalk runs docs/azure.md's walk (<!-- walk: azure -->) as a
// script would, like TestREADMEWalks' aws case: the fake subscription, the
// plugin through `berth provider test`, then a whole berth run whose first
// job parks its environment and second resumes it.
func TestAzureWalk(t *testing.T) {
	walks := readmeWalks(t)
	if len(walks["azure"]) == 0 {
		t.Fatal("docs/azure.md has no block marked <!-- walk: azure -->")
	}
	if os.Geteuid() != 0 || exec.Command("unshare", "--net", "true").Run() != nil {
		t.Skip("starts berth on its default address: needs root for a private network namespace")
	}
	home := t.TempDir()
	out, err := runWalk(t, "azure", walkScript(walks["azure"]), home, true)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if err != nil || !strings.Contains(out, "OK: the plugin conforms") || !strings.Contains(out, "hello from berth-ci_") ||
		!strings.Contains(out, "\nkept\n") {
		t.Fatalf("azure walk: %v\n%s", err, out)
	}
}
