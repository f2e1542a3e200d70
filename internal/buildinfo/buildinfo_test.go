package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestLinkerFlagsWinOverTheToolchainStamp(t *testing.T) {
	i := Info{Version: "v1.2.3", Commit: "abc", Date: "2026-12-01T00:00:00Z"}
	fillFromBuild(&i, &debug.BuildInfo{Main: debug.Module{Version: "v0.0.1"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "def"}, {Key: "vcs.time", Value: "2020-01-01T00:00:00Z"}}})
	if i.Version != "v1.2.3" || i.Commit != "abc" || i.Date != "2026-12-01T00:00:00Z" {
		t.Fatalf("got %+v", i)
	}
}

func TestACheckoutBuildReportsItsCommitAndDirtyTree(t *testing.T) {
	var i Info
	fillFromBuild(&i, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "6d766b3"}, {Key: "vcs.time", Value: "2026-12-03T14:00:00Z"}, {Key: "vcs.modified", Value: "true"}}})
	if i.Version != "" || i.Commit != "6d766b3-dirty" || i.Date != "2026-12-03T14:00:00Z" {
		t.Fatalf("got %+v", i)
	}
}

// The date is the commit's, and the line says so: a reader must not take
// it for the time the binary was built.
func TestStringNamesTheDateForWhatItIs(t *testing.T) {
	got := Info{Version: "v1.2.3", Commit: "abc", Date: "2026-12-01T00:00:00Z", GoVersion: "go1.26.8"}.String()
	if want := "v1.2.3 (commit abc, commit date 2026-12-01T00:00:00Z, go1.26.8)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestReadNeverLeavesAFieldEmpty(t *testing.T) {
	i := Read()
	if i.Version == "" || i.Commit == "" || i.Date == "" || i.GoVersion == "" {
		t.Fatalf("got %+v", i)
	}
}
