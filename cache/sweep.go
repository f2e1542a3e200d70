package cache

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A Put writes to a temporary file (.put-*) and renames it into place; a
// berth killed meanwhile (kill -9, OOM, power) left it behind for ever,
// outside the size bound (issue 32). NewLocal and every eviction remove
// those no Put touched for staleTemp: a Put in progress writes to its
// file all along, and a directory shared by two managers or two GitLab
// sources keeps the other's Put.

// tempPrefix names a Put's temporary file.
const tempPrefix = ".put-"

// staleTemp is how long a temporary file must lie untouched to be a
// leftover.
const staleTemp = 10 * time.Minute

// sweepTemps removes the stale temporary files in dir and returns how
// many bytes it freed.
func sweepTemps(dir string, now time.Time, log *slog.Logger) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int
	var freed int64
	for _, e := range ents {
		if e.IsDir() || !strings.HasPrefix(e.Name(), tempPrefix) {
			continue
		}
		fi, err := e.Info()
		if err != nil || now.Sub(fi.ModTime()) < staleTemp {
			continue
		}
		if os.Remove(filepath.Join(dir, e.Name())) == nil {
			n++
			freed += fi.Size()
		}
	}
	if n > 0 {
		log.Info("removed cache files left by an interrupted store", "dir", dir, "files", n, "bytes", freed)
	}
	return freed
}
