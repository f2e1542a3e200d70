package berth_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/berth-ci/berth"
)

// A package of this module that cmd/berth-sandbox imports but the hash
// does not cover could change without berth noticing that a berth-sandbox
// beside it is stale.
func TestSandboxSourceCoversTheSandbox(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.ImportPath}}{{end}}{{end}}", "./cmd/berth-sandbox").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	covered := berth.SandboxSourceDirs()
	for _, pkg := range strings.Fields(string(out)) {
		dir, ok := strings.CutPrefix(pkg, "github.com/berth-ci/berth/")
		if !ok || dir == "cmd/berth-sandbox" {
			continue // the root package itself; the command only calls in
		}
		if !slices.Contains(covered, dir) {
			t.Errorf("cmd/berth-sandbox imports %s, but sandboxsource.go does not embed %s/*.go: add it to the go:embed lines", pkg, dir)
		}
	}
}

func TestSandboxSourceHashIsStable(t *testing.T) {
	a, b := berth.SandboxSourceHash(), berth.SandboxSourceHash()
	if len(a) != 64 || a != b {
		t.Fatalf("hash %q then %q", a, b)
	}
}
