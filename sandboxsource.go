// Package berth holds what only the module's root can see: the source of
// every package a local sandbox runs, so that two binaries can tell whether
// they were built from the same sandbox code.
//
// berth starts its local sandboxes from the lean berth-sandbox binary when
// one lies beside it (provider/local), and the interface between the two
// (the sandbox configuration, the descriptors it inherits, the disk poller
// protocol) is internal: it may change in any commit. The Go build ID
// differs between two binaries, and a dirty checkout has no revision that
// tells two builds apart, so both binaries hash the same embedded source.
package berth

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"strconv"
	"strings"
	"sync"
)

// sandboxSource is the source of cmd/berth-sandbox's packages from this
// module, and go.mod and go.sum, which pick the versions of the modules it
// uses (test binaries carry no list of modules to compare). TestSandboxSourceCoversTheSandbox fails when a package joins the
// sandbox's imports without being listed here.
//
//go:embed go.mod go.sum provider/*.go provider/local/*.go jobroot/*.go images/*.go
//go:embed internal/atomicfile/*.go internal/bytesize/*.go internal/cloexec/*.go internal/diskfull/*.go internal/logging/*.go internal/quietcopy/*.go internal/localexec/*.go
var sandboxSource embed.FS

// SandboxSourceHash returns a hex SHA-256 over the names and contents of
// the sandbox's source files, tests left out (a change to a test changes no
// binary).
var SandboxSourceHash = sync.OnceValue(func() string {
	h := sha256.New()
	// WalkDir visits in lexical order, so the hash is stable.
	err := fs.WalkDir(sandboxSource, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := sandboxSource.ReadFile(path)
		if err != nil {
			return err
		}
		// Length-prefixed so that no two file sets hash alike.
		h.Write([]byte(path + "\x00" + strconv.Itoa(len(b)) + "\x00"))
		h.Write(b)
		return nil
	})
	if err != nil {
		// An embed.FS cannot fail to read itself.
		panic("berth: read embedded sandbox source: " + err.Error())
	}
	return hex.EncodeToString(h.Sum(nil))
})

// SandboxSourceDirs lists the directories whose source SandboxSourceHash
// covers, for the test that checks the list against the sandbox's imports.
func SandboxSourceDirs() []string {
	var dirs []string
	fs.WalkDir(sandboxSource, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && path != "." {
			if matches, _ := fs.Glob(sandboxSource, path+"/*.go"); len(matches) > 0 {
				dirs = append(dirs, path)
			}
		}
		return err
	})
	return dirs
}
