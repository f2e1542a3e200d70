package images

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// file is one entry of a test layer.
type file struct {
	name, body, link string
	typ              byte
	mode             int64
}

// layerTar builds a tar stream from entries.
func layerTar(t testing.TB, files ...file) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		typ := f.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := f.mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		hdr := &tar.Header{Name: f.name, Typeflag: typ, Mode: mode, Linkname: f.link, Size: int64(len(f.body))}
		if typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			tw.Write([]byte(f.body))
		}
	}
	tw.Close()
	return buf.Bytes()
}

func layer(t testing.TB, files ...file) v1.Layer {
	b := layerTar(t, files...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// randomLayer is a layer of n files of size bytes of random data each.
func randomLayer(t testing.TB, n, size int) v1.Layer {
	var files []file
	for i := range n {
		b := make([]byte, size)
		rand.Read(b)
		files = append(files, file{name: fmt.Sprintf("data/f%d", i), body: string(b)})
	}
	return layer(t, files...)
}

// buildImage stacks layers into a linux/amd64 image with env.
func buildImage(t testing.TB, env []string, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = env
	cf.Config.WorkingDir = "/work"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// testRegistry is go-containerregistry's registry in the test process,
// optionally behind a handler wrapper.
type testRegistry struct {
	srv  *httptest.Server
	host string
}

func newRegistry(t testing.TB, wrap func(http.Handler) http.Handler) *testRegistry {
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testRegistry{srv: srv, host: strings.TrimPrefix(srv.URL, "http://")}
}

// push writes img as host/repo and returns the reference string.
func (r *testRegistry) push(t testing.TB, repo string, img v1.Image) string {
	t.Helper()
	s := r.host + "/" + repo
	ref, err := name.ParseReference(s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	return s
}

// pushIndex writes an index of images as host/repo.
func (r *testRegistry) pushIndex(t testing.TB, repo string, idx v1.ImageIndex) string {
	t.Helper()
	s := r.host + "/" + repo
	ref, _ := name.ParseReference(s, name.Insecure)
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	return s
}

// openCache is a cache in a temp dir that may use the test registry.
func (r *testRegistry) openCache(t testing.TB, mod func(*Config)) *Cache {
	t.Helper()
	cfg := Config{Dir: t.TempDir(), Insecure: []string{r.host}, Keychain: noKeychain{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&cfg)
	}
	c, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// noKeychain keeps tests away from the developer's ~/.docker/config.json.
type noKeychain struct{}

func (noKeychain) Resolve(authn.Resource) (authn.Authenticator, error) { return authn.Anonymous, nil }
