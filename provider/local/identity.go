package local

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"

	"github.com/berth-ci/berth"
)

// IdentityEnv set to 1 makes a binary that calls RunSandboxIfRequested
// (berth-sandbox, berth, a provider plugin) print its build identity as
// JSON and exit: berth reads it from a berth-sandbox it finds.
const IdentityEnv = "BERTH_SANDBOX_IDENTITY"

// writeIdentityIfRequested prints the build identity and exits when
// IdentityEnv asks for it.
func writeIdentityIfRequested() {
	if os.Getenv(IdentityEnv) != "1" {
		return
	}
	if err := json.NewEncoder(os.Stdout).Encode(ownIdentity()); err != nil {
		fmt.Fprintln(os.Stderr, "write build identity:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// buildIdentity says which sandbox code a binary holds. Two binaries whose
// identities match run the same code on the sandbox's side, whatever else
// one of them links: the same source of this module's sandbox packages, the
// same versions of the modules they use, the same toolchain and build tags.
type buildIdentity struct {
	// Source is berth.SandboxSourceHash.
	Source string `json:"source"`
	// Go is the toolchain version.
	Go string `json:"go"`
	// Module is the main module's path.
	Module string `json:"module"`
	// Deps maps each module the binary links to "version sum", with
	// "=> path version sum" for a replacement. Test binaries list none;
	// Source covers go.mod and go.sum for them.
	Deps map[string]string `json:"deps"`
	// Build holds the build settings that change code: GOOS, GOARCH,
	// -tags and GOEXPERIMENT (race, cgo, trimpath and linker flags do not
	// change what a sandbox does).
	Build map[string]string `json:"build"`
}

// codeSettings are the build settings buildIdentity compares.
var codeSettings = []string{"GOOS", "GOARCH", "-tags", "GOEXPERIMENT"}

// ownIdentity is the running binary's identity.
var ownIdentity = sync.OnceValue(func() buildIdentity {
	id := buildIdentity{Source: berth.SandboxSourceHash(), Go: runtime.Version(), Deps: map[string]string{}, Build: map[string]string{}}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return id
	}
	id.Module = bi.Main.Path
	for _, d := range bi.Deps {
		v := d.Version + " " + d.Sum
		if r := d.Replace; r != nil {
			v += " => " + r.Path + " " + r.Version + " " + r.Sum
		}
		id.Deps[d.Path] = v
	}
	for _, s := range bi.Settings {
		for _, k := range codeSettings {
			if s.Key == k {
				id.Build[k] = s.Value
			}
		}
	}
	return id
})

// mismatch returns why a sandbox binary of identity sb does not run the
// sandbox code this binary (id) would, or "" when it does. Every module sb
// links must be linked here at the same version; this binary may link more
// (a test binary lists no modules: go.mod and go.sum in Source stand in).
func (id buildIdentity) mismatch(sb buildIdentity) string {
	var why []string
	if sb.Source != id.Source {
		why = append(why, "built from other source (sandbox source hash "+short(sb.Source)+", this binary's "+short(id.Source)+")")
	}
	if sb.Go != id.Go {
		why = append(why, fmt.Sprintf("built by %s, this binary by %s", sb.Go, id.Go))
	}
	if sb.Module != id.Module {
		why = append(why, fmt.Sprintf("module %q, this binary's %q", sb.Module, id.Module))
	}
	var deps []string
	for path, v := range sb.Deps {
		if len(id.Deps) == 0 {
			break
		}
		if own, ok := id.Deps[path]; !ok {
			deps = append(deps, path+" "+v+" (not linked here)")
		} else if own != v {
			deps = append(deps, path+" "+v+" (here "+own+")")
		}
	}
	sort.Strings(deps)
	if len(deps) > 0 {
		why = append(why, "other module versions: "+strings.Join(deps, ", "))
	}
	for _, k := range codeSettings {
		if sb.Build[k] != id.Build[k] {
			why = append(why, fmt.Sprintf("built with %s=%q, this binary with %q", k, sb.Build[k], id.Build[k]))
		}
	}
	return strings.Join(why, "; ")
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}
