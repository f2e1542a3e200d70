package images

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
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
// Two jobs on one instance may open the cache at once (one per transport),
// so a directory another Open made or replaced between our look and our
// change is taken as it is now: a second look settles it.
func (c *Cache) ensureDir(dir string) error {
	var err error
	for range 3 {
		var done bool
		if done, err = c.ensureDirOnce(dir); done {
			return err
		}
	}
	return err
}

// ensureDirOnce looks at dir once and makes it a directory. It reports done
// false when a concurrent Open changed dir under it.
func (c *Cache) ensureDirOnce(dir string) (bool, error) {
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		err = os.Mkdir(dir, 0o700)
		return !errors.Is(err, os.ErrExist), err
	case err != nil:
		return true, err
	case fi.IsDir():
		return true, nil
	}
	c.log.Warn("image cache directory damaged: rebuilding it", "path", dir, "found", fi.Mode().Type().String())
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, fmt.Errorf("remove %s (%s in place of a directory): %w", dir, fi.Mode().Type(), err)
	}
	err = os.Mkdir(dir, 0o700)
	return !errors.Is(err, os.ErrExist), err
}

// Sweep removes what a process killed mid-pull left in the cache at dir:
// half-unpacked layers in tmp and the temporary files of atomic writes.
// It is for start-up; it takes the cache lock without waiting and does
// nothing while a pull holds it (that pull's runner is alive: sandboxes
// outlive berth). It returns how many entries it removed.
func Sweep(dir string) (int, error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil // never used
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return 0, nil // a pull is running; it sweeps when it ends
	}
	n := 0
	entries, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	for _, e := range entries {
		if removeTree(filepath.Join(dir, "tmp", e.Name())) == nil {
			n++
		}
	}
	for _, sub := range []string{"layers", "images", "refs"} {
		tmps, _ := filepath.Glob(filepath.Join(dir, sub, "*.tmp"))
		for _, p := range tmps {
			if os.Remove(p) == nil {
				n++
			}
		}
	}
	return n, nil
}
