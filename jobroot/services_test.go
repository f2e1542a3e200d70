//go:build linux

package jobroot

import (
	"slices"
	"testing"
)

func TestServiceHostNamesFollowGitLab(t *testing.T) {
	got := serviceHosts([]Service{
		{Image: "postgres:16", Alias: "db"},
		{Image: "tutum/wordpress:4.9"},
		{Image: "redis@sha256:0123"},
		{Image: "registry.local:5000/team/cache:1"}, // no valid derived name: the port's colon
	})
	want := []string{"db", "postgres", "tutum-wordpress", "tutum__wordpress", "redis"}
	if !slices.Equal(got, want) {
		t.Fatalf("host names %v, want %v", got, want)
	}
}
