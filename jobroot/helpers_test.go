package jobroot_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/berth-ci/berth/jobroot"
	_ "github.com/berth-ci/berth/provider/local" // the seccomp filter jobs get
)

func TestMain(m *testing.M) {
	jobroot.RunIfRequested()
	os.Exit(m.Run())
}

// applets are the busybox commands the test image links.
var applets = []string{"sh", "cat", "ls", "echo", "id", "hostname", "mount", "touch", "grep", "test", "pwd", "env", "sleep", "mkdir", "unshare"}

// busyboxLayer is a layer with /bin/busybox from the machine (busybox-static,
// installed by .ci/run) and its applets.
func busyboxLayer(t testing.TB) v1.Layer {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("busybox-static is needed (.ci/run installs it): %v", err)
		}
		t.Skipf("/bin/busybox is missing (apt-get install busybox-static): %v", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))})
	tw.Write(bb)
	for _, a := range applets {
		tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox"})
	}
	body := "root:x:0:0:root:/root:/bin/sh\nbuilder:x:1000:1000::/home/builder:/bin/sh\n"
	tw.WriteHeader(&tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
	tw.Write([]byte(body))
	os := "NAME=berth-test-image\n"
	tw.WriteHeader(&tar.Header{Name: "etc/os-release", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(os))})
	tw.Write([]byte(os))
	tw.Close()
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// testImage is a busybox image with env, working directory and user set.
func testImage(t testing.TB, user string, extra ...v1.Layer) v1.Image {
	img, err := mutate.AppendLayers(empty.Image, append([]v1.Layer{busyboxLayer(t)}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/bin", "IMAGE_VAR=from-image"}
	cf.Config.WorkingDir = "/srv/app"
	cf.Config.User = user
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// push starts a registry in the test process and pushes img as repo.
func push(t testing.TB, repo string, img v1.Image) (ref, host string) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host = strings.TrimPrefix(srv.URL, "http://")
	r, _ := name.ParseReference(host+"/"+repo, name.Insecure)
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	return host + "/" + repo, host
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
