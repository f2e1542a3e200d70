package images

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func TestHostileLayersStayInsideTheirDirectory(t *testing.T) {
	outside := t.TempDir()
	for _, tc := range []struct {
		name  string
		files []file
	}{
		{"dot-dot", []file{{name: "../escape", body: "x"}}},
		{"write through a symlinked dir", []file{{name: "d", typ: '2', link: outside}, {name: "d/escape", body: "x"}}},
		{"hardlink outside", []file{{name: "h", typ: '1', link: "../../etc/passwd"}}},
		{"hardlink through symlink", []file{{name: "d", typ: '2', link: "/etc"}, {name: "h", typ: '1', link: "d/passwd"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := layerTar(t, tc.files...)
			dir := t.TempDir()
			_, err := unpackLayer(bytes.NewReader(b), digestOf(b), dir, nil)
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("unpack = %v, want a corrupt-layer error", err)
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Fatalf("the layer wrote %s outside its directory", ents[0].Name())
			}
		})
	}
}

func TestUnpackKeepsLinksAndSkipsDevices(t *testing.T) {
	b := layerTar(t,
		file{name: "/abs/file", body: "abs"},
		file{name: "link", typ: '2', link: "/etc/passwd"},
		file{name: "hard", typ: '1', link: "abs/file"},
		file{name: "dev/sda", typ: '4'},
		file{name: "fifo", typ: '6'},
		file{name: "opq/", typ: '5'},
		file{name: "opq/.wh..wh..opq"})
	dir := t.TempDir()
	if _, err := unpackLayer(bytes.NewReader(b), digestOf(b), dir, nil); err != nil {
		t.Fatal(err)
	}
	if l, _ := os.Readlink(filepath.Join(dir, "link")); l != "/etc/passwd" {
		t.Fatalf("symlink reads %q", l)
	}
	if c, _ := os.ReadFile(filepath.Join(dir, "hard")); string(c) != "abs" {
		t.Fatalf("hardlink reads %q", c)
	}
	for _, n := range []string{"dev/sda", "fifo"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			t.Errorf("%s was created", n)
		}
	}
	var v [8]byte
	if n, err := unix.Getxattr(filepath.Join(dir, "opq"), "user.overlay.opaque", v[:]); err != nil || string(v[:n]) != "y" {
		t.Fatalf("opaque xattr = %q, %v", v[:n], err)
	}
}

func TestDigestMismatchIsCorrupt(t *testing.T) {
	b := layerTar(t, file{name: "a", body: "a"})
	_, err := unpackLayer(bytes.NewReader(b), digestOf([]byte("other")), t.TempDir(), nil)
	if !errors.Is(err, errCorrupt) || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("unpack = %v, want a digest mismatch", err)
	}
}

// TestFullDiskDuringUnpack fills a 1 MiB tmpfs: the pull fails as a disk
// problem of the instance and nothing half-unpacked remains.
func TestFullDiskDuringUnpack(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting a small tmpfs needs root (CI runs as root)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	defer exec.Command("umount", dir).Run()
	r := newRegistry(t, nil)
	ref := r.push(t, "big:1", buildImage(t, nil, randomLayer(t, 4, 512<<10)))
	c := r.openCache(t, func(c *Config) { c.Dir = dir })
	pe := pullKind(t, c, ref, nil, KindDiskFull)
	if pe.FailureReason() != "runner_system_failure" {
		t.Fatalf("failure reason %s", pe.FailureReason())
	}
	left, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	layers, _ := os.ReadDir(filepath.Join(dir, "layers"))
	if len(left)+len(layers) != 0 {
		t.Fatalf("a failed unpack left %d temp dirs and %d layers", len(left), len(layers))
	}
}

// TestLeftoversOfAKilledUnpackAreRemoved: a runner killed mid-unpack leaves
// a temporary directory; the next pull removes it and never uses it.
func TestLeftoversOfAKilledUnpackAreRemoved(t *testing.T) {
	r := newRegistry(t, nil)
	ref := r.push(t, "app:1", buildImage(t, nil, layer(t, file{name: "a", body: "a"})))
	c := r.openCache(t, nil)
	half := filepath.Join(c.cfg.Dir, "tmp", "layer-123")
	os.MkdirAll(filepath.Join(half, "usr"), 0o755)
	im, err := c.Get(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	im.Release()
	if _, err := os.Stat(half); !os.IsNotExist(err) {
		t.Fatalf("the half unpack is still there: %v", err)
	}
}

func TestZstdLayersUnpack(t *testing.T) {
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	zw.Write(layerTar(t, file{name: "z", body: "zstd"}))
	zw.Close()
	dir := t.TempDir()
	if _, err := unpackLayer(bytes.NewReader(buf.Bytes()), digestOf(buf.Bytes()), dir, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "z")); string(b) != "zstd" {
		t.Fatalf("z = %q", b)
	}
}
