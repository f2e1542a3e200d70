package images

import (
	"os"
	"path/filepath"
	"testing"

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
