package images

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// TestWhiteoutsNamingNoFileAreRefused serves layers whose whiteouts name
// "", "." or "..": the pull fails as a corrupt layer, nothing outside the
// layer is touched, and the cache keeps working for the next image.
func TestWhiteoutsNamingNoFileAreRefused(t *testing.T) {
	r := newRegistry(t, nil)
	good := r.push(t, "good:1", buildImage(t, nil, layer(t, file{name: "ok", body: "ok"})))
	for _, name := range []string{".wh...", "d/.wh...", ".wh..", ".wh."} {
		t.Run(name, func(t *testing.T) {
			c := r.openCache(t, nil)
			ref := r.push(t, "bad:1", buildImage(t, nil, layer(t, file{name: "d/", typ: '5'}, file{name: name})))
			pullKind(t, c, ref, nil, KindCorrupt)
			for _, d := range cacheDirs {
				if fi, err := os.Lstat(filepath.Join(c.cfg.Dir, d)); err != nil || !fi.IsDir() {
					t.Fatalf("the cache's %s is no longer a directory: %v", d, err)
				}
			}
			get(t, c, good).Release()
		})
	}
}

// TestDamagedCacheDirsAreRebuilt replaces the cache's directories with a
// FIFO and a symlink, as a hostile layer once could: the next job's Open
// rebuilds them and the pull works.
func TestDamagedCacheDirsAreRebuilt(t *testing.T) {
	r := newRegistry(t, nil)
	ref := r.push(t, "app:1", buildImage(t, nil, layer(t, file{name: "a", body: "a"})))
	c := r.openCache(t, nil)
	get(t, c, ref).Release()
	tmp := filepath.Join(c.cfg.Dir, "tmp")
	removeTree(tmp)
	if err := unix.Mkfifo(tmp, 0); err != nil {
		t.Fatal(err)
	}
	refs := filepath.Join(c.cfg.Dir, "refs")
	removeTree(refs)
	if err := os.Symlink("/", refs); err != nil {
		t.Fatal(err)
	}
	c2 := r.openCache(t, func(cfg *Config) { cfg.Dir = c.cfg.Dir })
	get(t, c2, ref).Release()
	get(t, c2, r.push(t, "other:1", buildImage(t, nil, layer(t, file{name: "b", body: "b"})))).Release()
}

// TestCachesOpenedAtOnceOnAFreshDirectory: two image jobs that start
// together on a new instance (one over SSH, one over the exec transport)
// open its cache at the same moment; both must get it, neither an
// "exists" error from the other's mkdir.
func TestCachesOpenedAtOnceOnAFreshDirectory(t *testing.T) {
	for round := range 20 {
		dir := filepath.Join(t.TempDir(), "cache")
		errs := make(chan error, 8)
		for range cap(errs) {
			go func() {
				_, err := Open(Config{Dir: dir, Keychain: noKeychain{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				errs <- err
			}()
		}
		for range cap(errs) {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

// bombLayer is a gzip layer of one file of n zero bytes: a few KiB on the
// wire per MiB unpacked.
func bombLayer(t *testing.T, n int) v1.Layer {
	return layer(t, file{name: "zeros", body: strings.Repeat("\x00", n)})
}

// TestPullsStopAtTheirLimits serves a gzip bomb, an image of too many
// entries and a layer larger than allowed: each pull stops with a
// too-large error naming the key, nothing of it stays in the cache, and
// the cache still pulls a good image afterwards.
func TestPullsStopAtTheirLimits(t *testing.T) {
	r := newRegistry(t, nil)
	good := r.push(t, "good:1", buildImage(t, nil, layer(t, file{name: "ok", body: "ok"})))
	var many []file
	for i := range 200 {
		many = append(many, file{name: fmt.Sprintf("f%d", i)})
	}
	for _, tc := range []struct {
		name, key string
		img       v1.Image
		lim       Limits
	}{
		{"gzip bomb", "max_image_size", buildImage(t, nil, layer(t, file{name: "a", body: "a"}), bombLayer(t, 12<<20)), Limits{ImageBytes: 4 << 20}},
		{"entries", "max_image_entries", buildImage(t, nil, layer(t, many...)), Limits{ImageEntries: 100}},
		{"declared layer size", "max_layer_size", buildImage(t, nil, randomLayer(t, 1, 64<<10)), Limits{LayerBytes: 16 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := r.openCache(t, func(cfg *Config) { cfg.Limits = tc.lim })
			pe := pullKind(t, c, r.push(t, "bomb:1", tc.img), nil, KindTooLarge)
			if !strings.Contains(pe.Error(), tc.key) || pe.FailureReason() != "image_pull_failure" {
				t.Fatalf("error %q (reason %s) does not name %s", pe, pe.FailureReason(), tc.key)
			}
			left, _ := os.ReadDir(filepath.Join(c.cfg.Dir, "tmp"))
			layers, _ := os.ReadDir(filepath.Join(c.cfg.Dir, "layers"))
			if len(left)+len(layers) != 0 {
				t.Fatalf("the stopped pull left %d temp dirs and %d layers", len(left), len(layers))
			}
			get(t, c, good).Release()
		})
	}
}

// TestStreamPastTheLayerLimitIsCut: a layer whose manifest understates its
// size is cut once its bytes pass max_layer_size, not read to the end.
func TestStreamPastTheLayerLimitIsCut(t *testing.T) {
	b := layerTar(t, file{name: "r", body: strings.Repeat("x", 64<<10)})
	in := &capReader{r: bytes.NewReader(b), limit: 16 << 10, key: "max_layer_size"}
	_, err := unpackLayer(in, digestOf(b), t.TempDir(), nil)
	var le *limitError
	if !errors.As(err, &le) || in.n > 16<<10+64<<10 {
		t.Fatalf("unpack = %v after %d bytes, want a limit error", err, in.n)
	}
}

// TestBombOnASmallFileSystemKeepsTheReserve unpacks a gzip bomb on an
// 8 MiB tmpfs with 2 MiB kept in reserve and no other limit: the pull stops
// as a disk problem, the reserve is never touched, and the cache works
// afterwards.
func TestBombOnASmallFileSystemKeepsTheReserve(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting a small tmpfs needs root (CI runs as root); TestPullsStopAtTheirLimits covers the limits unprivileged")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	defer exec.Command("umount", dir).Run()
	r := newRegistry(t, nil)
	good := r.push(t, "good:1", buildImage(t, nil, layer(t, file{name: "ok", body: "ok"})))
	bomb := r.push(t, "bomb:1", buildImage(t, nil, bombLayer(t, 1<<20), bombLayer(t, 1<<20+1), bombLayer(t, 12<<20)))
	c := r.openCache(t, func(cfg *Config) { cfg.Dir = filepath.Join(dir, "images"); cfg.Limits.Reserve = 2 << 20 })
	for range 3 { // each submit repeats the attack
		pe := pullKind(t, c, bomb, nil, KindDiskFull)
		if !strings.Contains(pe.Error(), "reserve") {
			t.Fatalf("error %q does not mention the reserve", pe)
		}
		if free := freeBytes(dir); free < 2<<20 {
			t.Fatalf("the bomb left %d bytes free, under the 2 MiB reserve", free)
		}
	}
	get(t, c, good).Release()
}

func TestInternalAddresses(t *testing.T) {
	for s, want := range map[string]bool{
		"127.0.0.1": true, "169.254.169.254": true, "10.1.2.3": true, "192.168.0.1": true, "172.16.0.1": true,
		"100.100.100.200": true, "0.0.0.0": true, "::1": true, "fd00:ec2::254": true, "fe80::1": true,
		"::ffff:127.0.0.1": true, "8.8.8.8": false, "2001:4860:4860::8888": false, "100.128.0.1": false,
	} {
		if got := internalAddr(netip.MustParseAddr(s)); got != want {
			t.Errorf("internalAddr(%s) = %v", s, got)
		}
	}
}

// TestHostPullsAreNoPortScanner names images at a closed port, a plain
// HTTP server and a TLS server on the host's loopback, none listed: each
// pull is refused before connecting, and all three errors read the same
// but for the registry's name.
func TestHostPullsAreNoPortScanner(t *testing.T) {
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	tlsWeb := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsWeb.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := ln.Addr().String()
	ln.Close()
	c := newRegistry(t, nil).openCache(t, func(cfg *Config) { cfg.RefusePrivate, cfg.Insecure = true, nil })
	var msgs []string
	for _, host := range []string{closed, strings.TrimPrefix(web.URL, "http://"), strings.TrimPrefix(tlsWeb.URL, "https://")} {
		pe := pullKind(t, c, host+"/probe:1", nil, KindUnreachable)
		msgs = append(msgs, strings.ReplaceAll(pe.Error(), host, "HOST"))
	}
	if msgs[0] != msgs[1] || msgs[1] != msgs[2] {
		t.Fatalf("the errors tell the ports apart:\n%s", strings.Join(msgs, "\n"))
	}
	if !strings.Contains(msgs[0], "private_registries") {
		t.Fatalf("the error does not say how to allow a private registry: %s", msgs[0])
	}
}

// TestListedPrivateRegistriesArePulled: a loopback registry listed in
// private_registries (or insecure_registries) is pulled from, but its
// redirect to an unlisted loopback address (a metadata service) is not
// followed.
func TestListedPrivateRegistriesArePulled(t *testing.T) {
	metadata := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("secret")) }))
	defer metadata.Close()
	good := layer(t, file{name: "a", body: "a"})
	d, _ := good.Digest()
	r := newRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/redir/blobs/"+d.String()) {
				http.Redirect(w, req, metadata.URL+"/latest/meta-data", http.StatusTemporaryRedirect)
				return
			}
			h.ServeHTTP(w, req)
		})
	})
	ok := r.push(t, "app:1", buildImage(t, nil, good))
	redir := r.push(t, "redir:1", buildImage(t, nil, good))
	c := r.openCache(t, func(cfg *Config) { cfg.RefusePrivate, cfg.Private = true, []string{r.host} })
	get(t, c, ok).Release()
	c2 := r.openCache(t, func(cfg *Config) { cfg.RefusePrivate, cfg.Private = true, []string{r.host} })
	pe := pullKind(t, c2, redir, nil, KindUnreachable)
	if !strings.Contains(pe.Error(), "loopback, link-local or private") {
		t.Fatalf("the redirect was not refused for its address: %v", pe)
	}
}

// TestAllowedImagesMatchWhatIsPulled: a digest after an allowed tag does
// not pass on the tag; the digest form must be allowed itself.
func TestAllowedImagesMatchWhatIsPulled(t *testing.T) {
	const dg = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		image, glob string
		want        bool
	}{
		{"golang:1.22@" + dg, "golang:1.22*", false},
		{"golang:1.22@" + dg, "golang:*", false},
		{"registry:5000/team/app:v1@" + dg, "registry:5000/team/app:v1*", false},
		{"golang:1.22@" + dg, "golang@" + dg, true},
		{"golang@" + dg, "index.docker.io/library/golang@sha256:*", true},
		{"registry:5000/team/app:v1@" + dg, "registry:5000/team/**", true},
		{"golang:1.22", "golang:*", true},
	} {
		ref, err := ParseRef(tc.image)
		if err != nil {
			t.Fatal(err)
		}
		if got := Allowed(tc.image, ref, []string{tc.glob}); got != tc.want {
			t.Errorf("Allowed(%s, %s) = %v", tc.image, tc.glob, got)
		}
	}
}

// TestDamagedLayerIsPulledAgain flips a byte of a cached layer's file and
// adds a file to another, as a disk might while berth is down: after the
// restart (the process's checks forgotten) the next Get sees both, logs
// them and pulls the image again, and the job reads the right bytes.
func TestDamagedLayerIsPulledAgain(t *testing.T) {
	r := newRegistry(t, nil)
	ref := r.push(t, "app:1", buildImage(t, nil, layer(t, file{name: "bin/tool", body: "right bytes"}), layer(t, file{name: "etc/conf", body: "x"})))
	var logged bytes.Buffer
	c := r.openCache(t, func(cfg *Config) {
		cfg.Verify = true
		cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	})
	im := get(t, c, ref)
	im.Release()
	tool := filepath.Join(im.LayerDirs[0], "bin", "tool")
	if err := os.WriteFile(tool, []byte("wrong bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(im.LayerDirs[1], "etc", "extra"), nil, 0o644)
	if im := get(t, c, ref); im.Pulled {
		t.Fatal("the layers were checked again within the same process")
	}
	verified.Clear() // a restart
	im = get(t, c, ref)
	defer im.Release()
	if !im.Pulled {
		t.Fatal("the damaged layers were used as they were")
	}
	if b, _ := os.ReadFile(tool); string(b) != "right bytes" {
		t.Fatalf("the job would read %q", b)
	}
	if n := strings.Count(logged.String(), "cached image layer damaged"); n != 2 {
		t.Fatalf("%d damaged layers logged, want 2:\n%s", n, logged.String())
	}
}

// TestSweepRemovesWhatAKilledPullLeft: a pull killed mid-unpack leaves a
// half layer and temporary files; Sweep at start-up removes them, and
// leaves everything alone while another pull holds the cache.
func TestSweepRemovesWhatAKilledPullLeft(t *testing.T) {
	r := newRegistry(t, nil)
	ref := r.push(t, "app:1", buildImage(t, nil, layer(t, file{name: "a", body: "a"})))
	c := r.openCache(t, nil)
	get(t, c, ref).Release()
	half := filepath.Join(c.cfg.Dir, "tmp", "layer-123")
	os.MkdirAll(filepath.Join(half, "usr", "lib"), 0o500)
	part := filepath.Join(c.cfg.Dir, "layers", "abc.size.tmp")
	os.WriteFile(part, []byte("1"), 0o600)
	unlock, err := c.lockCache()
	if err != nil {
		t.Fatal(err)
	}
	if n, err := Sweep(c.cfg.Dir); n != 0 || err != nil {
		t.Fatalf("Sweep under a running pull removed %d (%v)", n, err)
	}
	unlock()
	if n, err := Sweep(c.cfg.Dir); n != 2 || err != nil {
		t.Fatalf("Sweep removed %d entries (%v), want 2", n, err)
	}
	for _, p := range []string{half, part} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Fatalf("%s survived the sweep: %v", p, err)
		}
	}
	get(t, c, ref).Release()
}
