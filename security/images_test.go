//go:build linux

package security_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/images"
	"github.com/berth-ci/berth/internal/imagetest"
	"github.com/berth-ci/berth/jobroot"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// imageFixture is an instance of the attack fixture with its image cache
// opened on the host as berth's manager opens it (provider.ImageCacher),
// and a registry in the test process that serves crafted images.
type imageFixture struct {
	*fixture
	host  string
	cache *images.Cache
	good  string
}

func newImageFixture(t *testing.T, config string, lim images.Limits) *imageFixture {
	f := &imageFixture{fixture: newFixture(t, config), host: imagetest.Registry(t)}
	where, err := f.p.ImageCache(f.a)
	must(t, err)
	cfg := images.Config{Dir: where.Dir, Insecure: []string{f.host}, Limits: lim, RefusePrivate: true, Verify: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if where.Chown {
		cfg.Owner = &images.Owner{UID: where.UID, GID: where.GID}
	}
	f.cache, err = images.Open(cfg)
	must(t, err)
	f.good = imagetest.Push(t, f.host, "busybox:1", imagetest.Busybox(t, ""))
	return f
}

// pull makes the image ready as the manager does before an image job.
func (f *imageFixture) pull(image string) (*images.Image, error) {
	return f.cache.Get(f.ctx, image, nil)
}

// runIn runs script in image on the fixture's first instance, from the
// cache only, as a host-pulled job runs.
func (f *imageFixture) runIn(image, script string) (int, string) {
	f.t.Helper()
	im, err := f.pull(image)
	must(f.t, err)
	defer im.Release()
	ci, err := f.p.ConnectInfo(f.ctx, f.a)
	must(f.t, err)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
	defer cancel()
	var r executor.Runner
	code, err := r.RunInImage(ctx, ci, executor.Command{Script: script, Output: &out},
		executor.ImageJob{Name: image, Settings: jobroot.Settings{PullPolicy: "never"}})
	if err != nil {
		f.t.Fatalf("image job: %v\n%s", err, out.String())
	}
	return code, out.String()
}

// stillRunsImages checks that the instance runs a good image after an
// attack.
func (f *imageFixture) stillRunsImages() {
	f.t.Helper()
	if code, out := f.runIn(f.good, "cat /etc/os-release"); code != 0 || !strings.Contains(out, "berth-test-image") {
		f.t.Fatalf("the instance no longer runs images: exit %d\n%s", code, out)
	}
}

func layerOf(t *testing.T, hdrs ...*tar.Header) v1.Layer {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hdrs {
		tw.WriteHeader(h)
		if h.Typeflag == tar.TypeReg {
			tw.Write(make([]byte, h.Size))
		}
	}
	tw.Close()
	return imagetest.FromTar(t, buf.Bytes())
}

// TestImageAttacks: crafted images and registry names against the cache
// berth fills on the host, each followed by a good image job on the same
// instance.
func TestImageAttacks(t *testing.T) {
	f := newImageFixture(t, `{"disk_max": "64M"}`, images.Limits{ImageBytes: 32 << 20, ImageEntries: 10_000, LayerBytes: 8 << 20})
	kind := func(image string, want images.Kind) string {
		t.Helper()
		im, err := f.pull(image)
		if err == nil {
			im.Release()
			t.Fatalf("%s was pulled, want %s", image, want)
		}
		var pe *images.PullError
		if !errors.As(err, &pe) || pe.Kind != want {
			t.Fatalf("%s: %v, want %s", image, err, want)
		}
		return pe.Error()
	}
	t.Run("whiteout names", func(t *testing.T) {
		for _, n := range []string{".wh...", ".wh..", ".wh."} {
			bad := imagetest.Push(t, f.host, "wh:1", imagetest.Busybox(t, "", layerOf(t, &tar.Header{Name: n, Typeflag: tar.TypeReg})))
			kind(bad, images.KindCorrupt)
			f.stillRunsImages()
		}
	})
	t.Run("gzip bomb", func(t *testing.T) {
		bomb := imagetest.Push(t, f.host, "bomb:1", imagetest.Busybox(t, "", layerOf(t, &tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: 48 << 20})))
		for range 3 {
			if msg := kind(bomb, images.KindTooLarge); !strings.Contains(msg, "max_image_size") {
				t.Fatalf("the error does not name the key: %s", msg)
			}
		}
		if used := du(f.instDir(f.a)); used > 32<<20 {
			t.Fatalf("the instance's directory takes %d bytes after three bombs", used)
		}
		f.stillRunsImages()
	})
	t.Run("writing past disk_max", func(t *testing.T) {
		code, out := f.runIn(f.good, `for i in $(seq 1 100); do cat /bin/busybox >> /big; done; sleep 10; echo survived`)
		if code == 0 || strings.Contains(out, "survived") {
			t.Fatalf("an image job wrote past disk_max 64M and went on: exit %d\n%s", code, out)
		}
		if !strings.Contains(out, "provider_config disk_max") {
			t.Fatalf("the job was not told why:\n%s", out)
		}
		f.recycle(f.a)
		f.stillRunsImages()
	})
	t.Run("port scan", func(t *testing.T) {
		tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
		defer tlsSrv.Close()
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		closed := ln.Addr().String()
		ln.Close()
		var msgs []string
		for _, target := range []string{f.api, strings.TrimPrefix(tlsSrv.URL, "https://"), closed, "169.254.169.254"} {
			msgs = append(msgs, strings.ReplaceAll(kind(target+"/x:1", images.KindUnreachable), target, "HOST"))
		}
		for _, m := range msgs[1:] {
			if m != msgs[0] {
				t.Fatalf("the errors tell the targets apart:\n%s", strings.Join(msgs, "\n"))
			}
		}
	})
	t.Run("digest behind an allowed tag", func(t *testing.T) {
		ref, err := images.ParseRef(f.good + "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
		must(t, err)
		if images.Allowed(f.good+"@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", ref, []string{f.host + "/busybox:*"}) {
			t.Fatal("a digest passed allowed_images on its tag")
		}
	})
}

// du is the space the files under dir take.
func du(dir string) int64 {
	var used int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil {
			used += fi.Sys().(*syscall.Stat_t).Blocks * 512
		}
		return nil
	})
	return used
}
