package artifacts

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
)

// TestZipToTarRefusesSymlinkChains: links each harmless by their own
// name, which leave the directory once the earlier ones exist.
func TestZipToTarRefusesSymlinkChains(t *testing.T) {
	type ent struct{ name, link, body string }
	mk := func(ents ...ent) []byte {
		return zipOf(t, func(zw *zip.Writer) {
			for _, e := range ents {
				h := &zip.FileHeader{Name: e.name}
				if e.link != "" {
					h.SetMode(os.ModeSymlink | 0o777)
				} else {
					h.SetMode(0o644)
				}
				w, _ := zw.CreateHeader(h)
				w.Write([]byte(e.link + e.body))
			}
		})
	}
	for name, z := range map[string][]byte{
		"chain":        mk(ent{name: "a/b/c", link: ".."}, ent{name: "a/b/c/x", link: "../.."}),
		"deeper chain": mk(ent{name: "a/b", link: "."}, ent{name: "a/b/b/b/up", link: "../.."}, ent{name: "a/b/up/f", body: "x"}),
		"third link":   mk(ent{name: "d/e/l", link: ".."}, ent{name: "d/e/l/l2", link: "../.."}),
		"loop":         mk(ent{name: "x", link: "y"}, ent{name: "y", link: "x"}, ent{name: "x/f", body: "x"}),
	} {
		if _, err := ZipToTar(bytes.NewReader(z), int64(len(z)), io.Discard); !errors.Is(err, ErrEscapes) {
			t.Errorf("%s: %v, want ErrEscapes", name, err)
		}
	}
	ok := mk(ent{name: "out/sub/a.txt", body: "x"}, ent{name: "out/link", link: "sub/a.txt"}, ent{name: "out/up", link: "../out"}, ent{name: "out/up/again", link: "sub"})
	if _, err := ZipToTar(bytes.NewReader(ok), int64(len(ok)), io.Discard); err != nil {
		t.Fatalf("links that stay inside: %v", err)
	}
}
