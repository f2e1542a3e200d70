package images

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A cache filled by host root for a sandbox whose root is a subordinate
// uid gives every file it creates to that uid, so that the sandbox can
// lock, evict and stack them.
func TestOwnerIsGivenEverythingTheCacheCreates(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving files to another user needs root")
	}
	r := newRegistry(t, nil)
	ref := r.push(t, "app:1", buildImage(t, nil,
		layer(t, file{name: "etc/", typ: '5'}, file{name: "etc/os-release", body: "x"}, file{name: "gone", body: "x"}),
		layer(t, file{name: ".wh.gone"}, file{name: "bin/", typ: '5'}, file{name: "bin/tool", body: "#!/bin/sh", mode: 0o755})))
	owner := &Owner{UID: 123457, GID: 123458}
	c := r.openCache(t, func(cfg *Config) { cfg.Owner = owner; cfg.MaxBytes = 1 << 30 })
	im, err := c.Get(ctx, ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	im.Release()
	n := 0
	err = filepath.WalkDir(c.cfg.Dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		if int(st.Uid) != owner.UID || int(st.Gid) != owner.GID {
			t.Errorf("%s is owned by %d:%d, want %d:%d", p, st.Uid, st.Gid, owner.UID, owner.GID)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 15 {
		t.Fatalf("walked only %d entries of the cache", n)
	}
}

// The host and the runner in the sandbox open the same directory as two
// caches: their file locks make one of them pull and the others use its
// result, whoever comes first.
func TestCachesSharingADirectoryPullOnce(t *testing.T) {
	r := newRegistry(t, nil)
	ref := r.push(t, "app:1", buildImage(t, nil, layer(t, file{name: "etc/", typ: '5'}, file{name: "etc/os-release", body: "x"})))
	first := r.openCache(t, nil)
	caches := []*Cache{first}
	for range 3 {
		caches = append(caches, r.openCache(t, func(cfg *Config) { cfg.Dir = first.cfg.Dir }))
	}
	pulled := make(chan bool, len(caches))
	errs := make(chan error, len(caches))
	for _, c := range caches {
		go func() {
			im, err := c.Get(ctx, ref, nil)
			if err != nil {
				errs <- err
				return
			}
			defer im.Release()
			if _, err := os.Stat(filepath.Join(im.LayerDirs[0], "etc/os-release")); err != nil {
				errs <- err
				return
			}
			pulled <- im.Pulled
			errs <- nil
		}()
	}
	for range caches {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(pulled)
	n := 0
	for p := range pulled {
		if p {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d of %d caches pulled the image, want exactly 1", n, len(caches))
	}
}
