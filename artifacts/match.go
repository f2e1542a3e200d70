// Package artifacts moves a job's files between its instance and berth:
// it picks files by GitLab's path patterns (artifacts:paths, exclude,
// untracked; cache:paths), packs them on the instance into a tar stream read
// over the executor's SSH connection, and turns that into GitLab's archive
// formats (zip, gzip); and it unpacks an archive into a directory on the
// instance. It is used for GitLab artifacts and for berth's cache, whose
// archives are GitLab's cache.zip.
package artifacts

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// ErrEscapes is returned (wrapped) for a path pattern or archive entry that
// would reach outside the build directory.
var ErrEscapes = errors.New("path escapes the build directory")

// Entry is one file or directory under the build directory, relative to it.
type Entry struct {
	Path string
	Dir  bool
}

// CleanPattern checks a path pattern of the job's .gitlab-ci.yml and returns
// it relative to the project directory. Absolute patterns are allowed only
// inside projectDir, as GitLab Runner allows them; anything that leaves it is
// refused.
func CleanPattern(pattern, projectDir string) (string, error) {
	p := pattern
	if path.IsAbs(p) {
		rel, ok := strings.CutPrefix(path.Clean(p), strings.TrimSuffix(path.Clean(projectDir), "/")+"/")
		if !ok {
			return "", fmt.Errorf("%w: %q is not inside the project directory %s; use a path relative to it", ErrEscapes, pattern, projectDir)
		}
		p = rel
	}
	p = path.Clean(p)
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("%w: %q leaves the project directory; artifacts and caches hold files under it only", ErrEscapes, pattern)
	}
	if !doublestar.ValidatePattern(p) {
		return "", fmt.Errorf("path pattern %q is not a valid glob", pattern)
	}
	return p, nil
}

// Select returns the paths of entries that paths pick (a picked directory
// brings everything under it), plus untracked ones when untracked is given,
// less those exclude picks; sorted, directories before what they hold.
func Select(entries []Entry, paths, exclude, untracked []string, projectDir string) ([]string, error) {
	inc, err := cleanAll(paths, projectDir)
	if err != nil {
		return nil, err
	}
	exc, err := cleanAll(exclude, projectDir)
	if err != nil {
		return nil, err
	}
	var roots []string // picked directories
	picked := map[string]bool{}
	for _, e := range entries {
		if matchAny(inc, e.Path) {
			picked[e.Path] = true
			if e.Dir {
				roots = append(roots, e.Path+"/")
			}
		}
	}
	for _, u := range untracked {
		picked[strings.TrimSuffix(u, "/")] = true
	}
	for _, e := range entries {
		for _, r := range roots {
			if strings.HasPrefix(e.Path, r) {
				picked[e.Path] = true
			}
		}
	}
	var out []string
	for p := range picked {
		if !excluded(exc, p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

func cleanAll(patterns []string, projectDir string) ([]string, error) {
	out := make([]string, 0, len(patterns))
	for _, p := range patterns {
		c, err := CleanPattern(p, projectDir)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func matchAny(patterns []string, p string) bool {
	for _, pat := range patterns {
		if ok, _ := doublestar.Match(pat, p); ok {
			return true
		}
	}
	return false
}

// excluded reports whether p or a directory above it matches an exclude.
func excluded(exc []string, p string) bool {
	for q := p; q != "." && q != "/" && q != ""; q = path.Dir(q) {
		if matchAny(exc, q) {
			return true
		}
	}
	return false
}
