package local

import (
	"strings"
	"testing"
)

func TestIdentityMismatchSaysWhatDiffers(t *testing.T) {
	own := buildIdentity{Source: "aaaa", Go: "go1.26.8", Module: "github.com/berth-ci/berth",
		Deps:  map[string]string{"golang.org/x/sys": "v0.50.0 h1:x=", "go.etcd.io/etcd": "v3 h1:y="},
		Build: map[string]string{"GOOS": "linux", "GOARCH": "amd64"}}
	same := own
	same.Deps = map[string]string{"golang.org/x/sys": "v0.50.0 h1:x="} // berth may link more
	if why := own.mismatch(same); why != "" {
		t.Errorf("same sandbox code reported as %q", why)
	}
	cases := []struct {
		name  string
		other func(b *buildIdentity)
		want  string
	}{
		{"source", func(b *buildIdentity) { b.Source = "bbbb" }, "built from other source"},
		{"toolchain", func(b *buildIdentity) { b.Go = "go1.25.0" }, "built by go1.25.0, this binary by go1.26.8"},
		{"dep version", func(b *buildIdentity) { b.Deps = map[string]string{"golang.org/x/sys": "v0.49.0 h1:z="} }, "golang.org/x/sys v0.49.0 h1:z= (here v0.50.0 h1:x=)"},
		{"dep not here", func(b *buildIdentity) { b.Deps = map[string]string{"example.com/m": "v1 h1:m="} }, "example.com/m v1 h1:m= (not linked here)"},
		{"tags", func(b *buildIdentity) {
			b.Build = map[string]string{"GOOS": "linux", "GOARCH": "amd64", "-tags": "debug"}
		}, `built with -tags="debug"`},
		{"arch", func(b *buildIdentity) { b.Build = map[string]string{"GOOS": "linux", "GOARCH": "arm64"} }, `GOARCH="arm64"`},
	}
	for _, c := range cases {
		other := same
		c.other(&other)
		if why := own.mismatch(other); !strings.Contains(why, c.want) {
			t.Errorf("%s: mismatch %q, want it to say %q", c.name, why, c.want)
		}
	}
	// A test binary lists no modules: go.mod and go.sum in the source hash
	// stand in for them.
	testBinary := own
	testBinary.Deps = map[string]string{}
	if why := testBinary.mismatch(same); why != "" {
		t.Errorf("test binary: %q", why)
	}
}
