// Package buildinfo says which berth is running: the version, commit and
// commit date that `berth version`, the berth_build_info metric and the
// runner registration with GitLab report.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at release time with
//
//	-ldflags "-X github.com/berth-ci/berth/internal/buildinfo.version=v1.2.3
//	          -X github.com/berth-ci/berth/internal/buildinfo.commit=abc123
//	          -X github.com/berth-ci/berth/internal/buildinfo.date=2026-12-03T14:00:00Z"
//
// (packaging/release.sh does). A plain `go build` in a git checkout leaves
// them empty and Read takes what the Go toolchain stamped into the binary.
var version, commit, date string

// Info describes one build.
type Info struct {
	// Version is the release version, or "dev" for a build from a checkout.
	Version string
	// Commit is the git revision, with "-dirty" when the tree had changes,
	// or "unknown".
	Commit string
	// Date is when the commit was made, RFC 3339, or "unknown". It is the
	// commit's date, not the build's, so that two builds of one commit are
	// the same bytes (reproducible releases); `berth version` says so.
	Date string
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// String is the line `berth version` prints.
func (i Info) String() string {
	return i.Version + " (commit " + i.Commit + ", commit date " + i.Date + ", " + i.GoVersion + ")"
}

// Read returns this binary's build info.
func Read() Info {
	i := Info{Version: version, Commit: commit, Date: date, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		fillFromBuild(&i, bi)
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	if i.Date == "" {
		i.Date = "unknown"
	}
	return i
}

// fillFromBuild fills what the linker flags left empty from the toolchain's
// stamp: the module version (set by `go install module@version`) and the VCS
// settings (set by `go build` in a git checkout).
func fillFromBuild(i *Info, bi *debug.BuildInfo) {
	if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		i.Version = bi.Main.Version
	}
	var rev, when string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if i.Commit == "" && rev != "" {
		i.Commit = rev
		if dirty && !strings.HasSuffix(rev, "-dirty") {
			i.Commit += "-dirty"
		}
	}
	if i.Date == "" {
		i.Date = when
	}
}
