package images

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// cacheDirs are the cache's own directories below Config.Dir.
var cacheDirs = []string{"layers", "images", "refs", "tmp"}

// ensureDirs makes the cache directory and its subdirectories real
// directories. Anything else in their place (a device node a hostile layer
// left, a symlink, a file) is removed and the directory made anew, so that
// one bad pull never fails every later job on the instance.
func (c *Cache) ensureDirs() error {
	if err := os.MkdirAll(filepath.Dir(c.cfg.Dir), 0o700); err != nil {
		return err
	}
	if err := c.ensureDir(c.cfg.Dir); err != nil {
		return err
	}
	for _, d := range cacheDirs {
		p := filepath.Join(c.cfg.Dir, d)
		if err := c.ensureDir(p); err != nil {
			return err
		}
		if err := c.ownAll(c.cfg.Dir, p); err != nil {
			return err
		}
	}
	return nil
}

// ensureDir makes dir a real directory, replacing whatever else is there.
func (c *Cache) ensureDir(dir string) error {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.Mkdir(dir, 0o700)
	case err != nil:
		return err
	case fi.IsDir():
		return nil
	}
	c.log.Warn("image cache directory damaged: rebuilding it", "path", dir, "found", fi.Mode().Type().String())
	if err := os.Remove(dir); err != nil {
		return fmt.Errorf("remove %s (%s in place of a directory): %w", dir, fi.Mode().Type(), err)
	}
	return os.Mkdir(dir, 0o700)
}
