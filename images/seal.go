package images

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// A layer's seal is a digest of its unpacked tree (every entry's path,
// type, mode, size, link target and content), written beside it when it is
// unpacked. A cached layer is checked against its seal before its first use
// by a process (Config.Verify): bytes damaged on disk, a file lost or
// added, are then seen, logged, and the layer pulled again, instead of
// jobs reading wrong bytes.

// verified holds the layers this process has checked, by directory and
// seal: a check reads every byte, so it runs once per process, not per job.
var verified sync.Map

func (c *Cache) sealPath(digest string) string { return c.layerDir(digest) + ".seal" }

// sealOf digests the tree under dir.
func sealOf(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if err != nil {
			// A directory without r or x for this user (an image's
			// own mode): the same each time, so it seals as such.
			fmt.Fprintf(h, "%s\x00unreadable\n", rel)
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, _ := fi.Sys().(*syscall.Stat_t)
		var rdev uint64
		if st != nil {
			rdev = st.Rdev
		}
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00%d", rel, fi.Mode(), fi.Size(), rdev)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			fmt.Fprintf(h, "\x00%s", l)
		case fi.Mode().IsRegular():
			fmt.Fprintf(h, "\x00%s", fileDigest(p))
		}
		h.Write([]byte("\n"))
		return nil
	})
	return hex.EncodeToString(h.Sum(nil)), err
}

// fileDigest is the sha256 of a file's bytes, or "unreadable" for a file
// this user may not read (mode 000 unprivileged).
func fileDigest(p string) string {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "unreadable"
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "read error: " + err.Error()
	}
	return hex.EncodeToString(h.Sum(nil))
}

// seal writes the seal of the layer unpacked in dir (not yet in place).
func (c *Cache) seal(digest, dir string) error {
	s, err := sealOf(dir)
	if err != nil {
		return fmt.Errorf("seal layer %s: %w", digest, err)
	}
	return c.writeAtomic(c.sealPath(digest), []byte(s))
}

// damagedLayers checks rec's layers against their seals, once per process
// each, and returns those that do not match. It logs each.
func (c *Cache) damagedLayers(rec *record) []string {
	var bad []string
	for _, l := range rec.Layers {
		want, err := os.ReadFile(c.sealPath(l))
		if errors.Is(err, os.ErrNotExist) {
			// Unpacked before layers had seals: nothing to compare
			// with, so it is sealed as it is now.
			c.log.Info("sealing a cached layer unpacked before seals", "layer", l)
			if err := c.seal(l, c.layerDir(l)); err != nil {
				c.log.Warn("sealing a cached layer failed", "layer", l, "err", err)
			}
			continue
		}
		key := c.layerDir(l) + "\x00" + string(want)
		if err == nil {
			if _, ok := verified.Load(key); ok {
				continue
			}
		}
		got, gerr := sealOf(c.layerDir(l))
		if err == nil && gerr == nil && got == strings.TrimSpace(string(want)) {
			verified.Store(key, true)
			continue
		}
		c.log.Warn("cached image layer damaged on disk: removing it to pull it again", "layer", l,
			"dir", c.layerDir(l), "seal_err", err, "walk_err", gerr, "want", string(want), "got", got)
		bad = append(bad, l)
	}
	return bad
}
