// Package imagetest builds small OCI images from the machine's static
// busybox and serves them from go-containerregistry's registry in the test
// process, for tests of jobs that run in images.
package imagetest

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Applets are the busybox commands Busybox links into /bin.
var Applets = []string{"sh", "cat", "ls", "echo", "id", "hostname", "mount", "touch", "grep", "test", "pwd", "env", "sleep", "mkdir", "unshare", "true", "false", "rm", "wc", "du", "httpd", "wget", "nc", "seq"}

// BusyboxLayer is a layer with /bin/busybox from the machine
// (busybox-static, which .ci/run installs), its applets, an /etc/passwd with
// root and builder (1000) and an /etc/os-release naming the test image.
func BusyboxLayer(t testing.TB) v1.Layer {
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
	dir := func(n string) { tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeDir, Mode: 0o755}) }
	file := func(n string, b []byte, mode int64) {
		tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(b))})
		tw.Write(b)
	}
	dir("bin/")
	file("bin/busybox", bb, 0o755)
	for _, a := range Applets {
		tw.WriteHeader(&tar.Header{Name: "bin/" + a, Typeflag: tar.TypeSymlink, Linkname: "busybox"})
	}
	dir("etc/")
	file("etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\nbuilder:x:1000:1000::/home/builder:/bin/sh\n"), 0o644)
	file("etc/os-release", []byte("NAME=berth-test-image\n"), 0o644)
	tw.Close()
	return FromTar(t, buf.Bytes())
}

// FromTar makes a gzip layer of a tar stream.
func FromTar(t testing.TB, b []byte) v1.Layer {
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Busybox is a linux/amd64 busybox image with PATH=/bin,
// IMAGE_VAR=from-image, WorkingDir /srv/app and the given user, with extra
// layers on top.
func Busybox(t testing.TB, user string, extra ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, append([]v1.Layer{BusyboxLayer(t)}, extra...)...)
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

// Registry starts a registry in the test process and returns its host:port
// (plain HTTP: list it in insecure_registries).
func Registry(t testing.TB) string {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Push writes img to host as repo and returns the image reference.
func Push(t testing.TB, host, repo string, img v1.Image) string {
	t.Helper()
	r, err := name.ParseReference(host+"/"+repo, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	return host + "/" + repo
}
