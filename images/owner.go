package images

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Owner is the user and group the cache's files are given. A cache filled
// by one user and used by another needs it: the local provider's image
// cache is filled by berth on the host (as root) and used by the job runner
// inside the sandbox, whose root is a subordinate uid of the host's, for
// which files owned by host root are unmapped (nobody, not writable, and
// refused by overlayfs in the sandbox's user namespace).
type Owner struct {
	// UID and GID are host IDs.
	UID, GID int
}

// own gives path to the configured owner; without one it does nothing.
// Lchown: the cache never follows a link, least of all one from an image.
func (c *Cache) own(path string) error {
	o := c.cfg.Owner
	if o == nil {
		return nil
	}
	return os.Lchown(path, o.UID, o.GID)
}

// ownTree gives everything under dir (an unpacked layer not yet renamed
// into place) to the configured owner.
func (c *Cache) ownTree(dir string) error {
	if c.cfg.Owner == nil {
		return nil
	}
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return c.own(p)
	})
}

// ownAll gives the listed paths to the configured owner, ignoring paths
// that do not exist.
func (c *Cache) ownAll(paths ...string) error {
	var errs []error
	for _, p := range paths {
		if err := c.own(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
