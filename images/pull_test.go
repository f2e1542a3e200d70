package images

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

var ctx = context.Background()

// pullKind asserts that Get fails with a PullError of kind that names the
// image.
func pullKind(t *testing.T, c *Cache, image string, creds []Credential, want Kind) *PullError {
	t.Helper()
	im, err := c.Get(ctx, image, creds)
	if err == nil {
		im.Release()
		t.Fatalf("Get(%s) worked, want %s", image, want)
	}
	var pe *PullError
	if !errors.As(err, &pe) || pe.Kind != want {
		t.Fatalf("Get(%s) = %v, want a PullError of kind %q", image, err, want)
	}
	if !strings.Contains(err.Error(), image) {
		t.Fatalf("error %q does not name the image %s", err, image)
	}
	return pe
}

func TestPullUnpacksLayersAndCachesThem(t *testing.T) {
	r := newRegistry(t, nil)
	ref := r.push(t, "app:1", buildImage(t, []string{"GREETING=hi"},
		layer(t, file{name: "etc/", typ: '5'}, file{name: "etc/os-release", body: "berth-test"}, file{name: "gone", body: "x"}),
		layer(t, file{name: ".wh.gone"}, file{name: "bin/tool", body: "#!/bin/sh", mode: 0o4755})))
	c := r.openCache(t, nil)

	im, err := c.Get(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Release()
	if !im.Pulled || len(im.LayerDirs) != 2 {
		t.Fatalf("first Get: pulled %v, %d layers; want a pull of 2 layers", im.Pulled, len(im.LayerDirs))
	}
	if b, _ := os.ReadFile(filepath.Join(im.LayerDirs[0], "etc/os-release")); string(b) != "berth-test" {
		t.Fatalf("etc/os-release in the bottom layer = %q", b)
	}
	fi, err := os.Lstat(filepath.Join(im.LayerDirs[1], "gone"))
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Fatalf("whiteout of /gone is %v, %v; want a character device", fi, err)
	}
	if fi, _ := os.Stat(filepath.Join(im.LayerDirs[1], "bin/tool")); fi.Mode()&os.ModeSetuid != 0 {
		t.Fatalf("bin/tool kept its setuid bit: %v", fi.Mode())
	}
	if im.Config.Env[0] != "GREETING=hi" || im.Config.WorkingDir != "/work" {
		t.Fatalf("config = %+v", im.Config)
	}
	again, err := c.Get(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Release()
	if again.Pulled || again.Digest != im.Digest {
		t.Fatalf("second Get pulled %v digest %s; want the cached %s", again.Pulled, again.Digest, im.Digest)
	}
}

func TestDockerHubShortNamesResolveAsDockerDoes(t *testing.T) {
	for in, want := range map[string]string{
		"golang":                      "index.docker.io/library/golang:latest",
		"golang:1.22":                 "index.docker.io/library/golang:1.22",
		"me/app":                      "index.docker.io/me/app:latest",
		"registry.example:5000/a/b:c": "registry.example:5000/a/b:c",
	} {
		ref, err := ParseRef(in)
		if err != nil || ref.Name() != want {
			t.Errorf("ParseRef(%q) = %v, %v; want %s", in, ref, err, want)
		}
	}
	pullKind(t, &Cache{}, "UPPER/Case", nil, KindInvalid)
}

func TestManifestListPicksLinuxAmd64(t *testing.T) {
	r := newRegistry(t, nil)
	amd := buildImage(t, []string{"ARCH=amd64"}, layer(t, file{name: "arch", body: "amd64"}))
	arm := buildImage(t, []string{"ARCH=arm64"}, layer(t, file{name: "arch", body: "arm64"}))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	ref := r.pushIndex(t, "multi:1", idx)
	c := r.openCache(t, nil)
	im, err := c.Get(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Release()
	if b, _ := os.ReadFile(filepath.Join(im.LayerDirs[0], "arch")); string(b) != "amd64" {
		t.Fatalf("picked the %q image", b)
	}

	armOnly := r.pushIndex(t, "armonly:1", mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}}))
	pe := pullKind(t, c, armOnly, nil, KindNoPlatform)
	if !strings.Contains(pe.Error(), "linux/arm64") || pe.FailureReason() != "image_pull_failure" {
		t.Fatalf("error %q (reason %s) does not list what the manifest has", pe, pe.FailureReason())
	}
}

func TestMissingUnreachableAndUnauthorisedRegistries(t *testing.T) {
	r := newRegistry(t, nil)
	c := r.openCache(t, nil)
	pullKind(t, c, r.host+"/nothing:here", nil, KindNotFound)

	dead := newRegistry(t, nil)
	dead.srv.Close()
	c2 := dead.openCache(t, nil)
	pullKind(t, c2, dead.host+"/app:1", nil, KindUnreachable)

	locked := newRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if u, p, ok := req.BasicAuth(); !ok || u != "ci" || p != "secret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"login"}]}`, http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, req)
		})
	})
	ref := locked.host + "/private:1"
	cl := locked.openCache(t, nil)
	pullKind(t, cl, ref, nil, KindUnauthorized)
	pullKind(t, cl, ref, []Credential{{Registry: locked.host, Username: "ci", Password: "wrong"}}, KindUnauthorized)
}

func TestJobCredentialsOpenAPrivateRegistry(t *testing.T) {
	plain := newRegistry(t, nil)
	img := buildImage(t, nil, layer(t, file{name: "a", body: "a"}))
	locked := newRegistry(t, func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if u, p, ok := req.BasicAuth(); !ok || u != "ci" || p != "secret" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			plain.srv.Config.Handler.ServeHTTP(w, req)
		})
	})
	plain.push(t, "private:1", img)
	c := locked.openCache(t, nil)
	im, err := c.Get(ctx, locked.host+"/private:1", []Credential{{Registry: locked.host, Username: "ci", Password: "secret"}})
	if err != nil {
		t.Fatal(err)
	}
	im.Release()
}

func TestPlainHTTPOnlyForListedRegistries(t *testing.T) {
	r := newRegistry(t, nil)
	ref := r.push(t, "app:1", buildImage(t, nil, layer(t, file{name: "a", body: "a"})))
	c := r.openCache(t, func(c *Config) { c.Insecure = nil })
	pe := pullKind(t, c, ref, nil, KindInsecure)
	if !strings.Contains(pe.Error(), "insecure_registries") {
		t.Fatalf("error %q does not say how to allow the registry", pe)
	}
}

func TestAllowedImages(t *testing.T) {
	r := newRegistry(t, nil)
	ref := r.push(t, "team/app:1", buildImage(t, nil, layer(t, file{name: "a", body: "a"})))
	c := r.openCache(t, func(c *Config) { c.Allowed = []string{"golang:*", r.host + "/other/**"} })
	pe := pullKind(t, c, ref, nil, KindDisallowed)
	if !strings.Contains(pe.Error(), "allowed_images") {
		t.Fatalf("error %q does not name allowed_images", pe)
	}
	for glob, image := range map[string]string{
		"golang:*":                  "golang:1.22",
		"index.docker.io/library/*": "golang:1.22",
		"registry:5000/**":          "registry:5000/a/b/c:1",
	} {
		ref, _ := ParseRef(image)
		if !Allowed(image, ref, []string{glob}) {
			t.Errorf("%s does not allow %s", glob, image)
		}
	}
	ref2, _ := ParseRef("registry:5000/a/b:1")
	if Allowed("registry:5000/a/b:1", ref2, []string{"registry:5000/*"}) {
		t.Errorf("* crossed a /")
	}
}

func TestPullPolicies(t *testing.T) {
	r := newRegistry(t, nil)
	dir := t.TempDir()
	ref := r.push(t, "app:1", buildImage(t, nil, layer(t, file{name: "v", body: "1"})))
	never := r.openCache(t, func(c *Config) { c.Dir, c.Policy = dir, PullNever })
	pe := pullKind(t, never, ref, nil, KindNotCached)
	if !strings.Contains(pe.Error(), "pull_policy") {
		t.Fatalf("error %q does not say what to change", pe)
	}
	ifNot := r.openCache(t, func(c *Config) { c.Dir = dir })
	get(t, ifNot, ref).Release()
	get(t, never, ref).Release()

	r.push(t, "app:1", buildImage(t, nil, layer(t, file{name: "v", body: "2"})))
	if im := get(t, ifNot, ref); readTop(t, im, "v") != "1" || im.Pulled {
		t.Fatalf("if-not-present pulled the moved tag")
	}
	always := r.openCache(t, func(c *Config) { c.Dir, c.Policy = dir, PullAlways })
	if im := get(t, always, ref); readTop(t, im, "v") != "2" {
		t.Fatalf("always did not pull the moved tag")
	}
	if _, err := ParsePullPolicy("sometimes"); err == nil {
		t.Fatal("pull policy sometimes accepted")
	}
}

func get(t *testing.T, c *Cache, ref string) *Image {
	t.Helper()
	im, err := c.Get(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(im.Release)
	return im
}

func readTop(t *testing.T, im *Image, name string) string {
	b, _ := os.ReadFile(filepath.Join(im.LayerDirs[len(im.LayerDirs)-1], name))
	return string(b)
}

func TestCorruptLayerIsNeverCached(t *testing.T) {
	good := layer(t, file{name: "a", body: strings.Repeat("a", 4096)})
	img := buildImage(t, nil, good)
	d, _ := good.Digest()
	bad := newRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if strings.HasSuffix(req.URL.Path, "/blobs/"+d.String()) && req.Method == http.MethodGet {
				rec := &flipWriter{ResponseWriter: w}
				h.ServeHTTP(rec, req)
				return
			}
			h.ServeHTTP(w, req)
		})
	})
	ref := bad.push(t, "app:1", img)
	c := bad.openCache(t, nil)
	pullKind(t, c, ref, nil, KindCorrupt)
	left, _ := os.ReadDir(filepath.Join(c.cfg.Dir, "tmp"))
	layers, _ := os.ReadDir(filepath.Join(c.cfg.Dir, "layers"))
	if len(left) != 0 || len(layers) != 0 {
		t.Fatalf("a corrupt pull left %d temp entries and %d layers", len(left), len(layers))
	}
}

// flipWriter corrupts the last byte of a blob on its way out.
type flipWriter struct {
	http.ResponseWriter
}

func (f *flipWriter) Write(p []byte) (int, error) {
	q := append([]byte(nil), p...)
	if len(q) > 0 {
		q[len(q)-1] ^= 0xff
	}
	return f.ResponseWriter.Write(q)
}

func TestEvictionDropsLeastRecentlyUsedImagesNotInUse(t *testing.T) {
	r := newRegistry(t, nil)
	a := r.push(t, "a:1", buildImage(t, nil, randomLayer(t, 1, 64<<10)))
	b := r.push(t, "b:1", buildImage(t, nil, randomLayer(t, 1, 64<<10)))
	cc := r.push(t, "c:1", buildImage(t, nil, randomLayer(t, 1, 64<<10)))
	c := r.openCache(t, func(c *Config) { c.MaxBytes = 150 << 10 })
	imA := get(t, c, a)
	imA.Release()
	held := get(t, c, b) // b stays in use
	get(t, c, cc).Release()
	if _, err := os.Stat(imA.LayerDirs[0]); !os.IsNotExist(err) {
		t.Fatalf("the least recently used image a survived: %v", err)
	}
	if _, err := os.Stat(held.LayerDirs[0]); err != nil {
		t.Fatalf("image b, in use, was evicted: %v", err)
	}
	if im := get(t, c, a); !im.Pulled {
		t.Fatal("a was not pulled again after eviction")
	}
}
