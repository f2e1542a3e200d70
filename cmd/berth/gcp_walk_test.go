package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The walk of docs/gcp.md, "Use with Google Cloud", run as a reader would
// (see readme_walk_test.go): build berth, the plugin and the fake, run the
// conformance suite, then a whole berth run with a job, and an environment
// suspended and resumed with its files.
func TestGCPWalk(t *testing.T) {
	walk := readmeWalks(t)["gcp"]
	if len(walk) == 0 {
		t.Fatal("docs/gcp.md has no block marked <!-- walk: gcp -->")
	}
	if os.Geteuid() != 0 || exec.Command("unshare", "--net", "true").Run() != nil {
		t.Skip("starts berth on its default address: needs root for a private network namespace")
	}
	out, err := runWalk(t, "gcp", walkScript(walk), t.TempDir(), true)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	// The resumed job prints the file the parked one wrote: "kept" on a
	// line of its own, after the command that printed it.
	_, resumed, _ := strings.Cut(out, "--resume")
	if err != nil || !strings.Contains(out, "OK: the plugin conforms") || !strings.Contains(out, "hello from ") ||
		!strings.Contains(resumed, "\nkept\n") {
		t.Fatalf("gcp walk: %v\n%s", err, out)
	}
}
