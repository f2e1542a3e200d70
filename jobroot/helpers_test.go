//go:build linux

package jobroot_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/berth-ci/berth/internal/imagetest"
	"github.com/berth-ci/berth/jobroot"
	_ "github.com/berth-ci/berth/provider/local" // the seccomp filter jobs get
)

func TestMain(m *testing.M) {
	jobroot.RunIfRequested()
	os.Exit(m.Run())
}

func testImage(t testing.TB, user string, extra ...v1.Layer) v1.Image {
	return imagetest.Busybox(t, user, extra...)
}

// push starts a registry in the test process and pushes img as repo.
func push(t testing.TB, repo string, img v1.Image) (ref, host string) {
	host = imagetest.Registry(t)
	return imagetest.Push(t, host, repo, img), host
}

// runJob runs script in spec's image and returns exit code and output.
func runJob(t testing.TB, spec jobroot.Spec, script string) (int, string, error) {
	t.Helper()
	spec.Command = []string{"sh", "-c", script}
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	code, err := jobroot.Run(context.Background(), spec, null, out, out)
	b, _ := os.ReadFile(out.Name())
	return code, string(b), err
}

// settings keep the cache in a temp dir and allow the test registry.
func settings(t testing.TB, host string) jobroot.Settings {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	return jobroot.Settings{CacheDir: filepath.Join(dir, "cache"), Insecure: []string{host}}
}
