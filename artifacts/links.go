package artifacts

import (
	"fmt"
	"path"
	"strings"
)

// maxLinkHops bounds how many of an archive's own symlinks one path may
// pass through, as the kernel's ELOOP does.
const maxLinkHops = 40

// archiveLinks are the symlinks an archive created so far, by the resolved
// path they sit at. A symlink's target is checked where it really lands:
// a chain of relative links, each harmless by itself ("a/b/c" -> "..",
// then "a/b/c/x" -> "../.."), can otherwise point out of the extraction
// directory once the earlier links exist on disk.
type archiveLinks map[string]string

// resolve follows the archive's symlinks through p (relative to the
// extraction directory) and returns where it lands; ok is false when it
// leaves the directory, is absolute, or loops.
func (l archiveLinks) resolve(p string, hops int) (string, bool) {
	cur := ""
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." {
			continue
		}
		next := path.Join(cur, part)
		if next == ".." || strings.HasPrefix(next, "../") {
			return "", false
		}
		if next == "." {
			next = ""
		}
		if target, isLink := l[next]; isLink {
			if hops++; hops > maxLinkHops || path.IsAbs(target) {
				return "", false
			}
			r, ok := l.resolve(path.Join(cur, target), hops)
			if !ok {
				return "", false
			}
			next = r
		}
		cur = next
	}
	return cur, true
}

// check refuses an entry whose directory leads out through the archive's
// symlinks, and records a symlink (target != "") once its target, read
// from where the link really sits, stays inside.
func (l archiveLinks) check(name, target string, isLink bool) error {
	dir, ok := l.resolve(path.Dir(name), 0)
	if !ok {
		return fmt.Errorf("%w: archive entry %s lies behind a symlink that leaves the directory", ErrEscapes, name)
	}
	if !isLink {
		return nil
	}
	if _, ok := l.resolve(path.Join(dir, target), 0); !ok || path.IsAbs(target) {
		return fmt.Errorf("%w: symlink %s points to %s, outside the directory once the archive's other links are followed", ErrEscapes, name, target)
	}
	l[path.Join(dir, path.Base(name))] = target
	return nil
}
