//go:build linux

package jobroot

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestConcurrentJobDirsSurvive starts many job directories at once in one
// cache, as image jobs sharing an instance do: each runner sweeps the
// directories of dead runners first, and must never take a live one's
// (seen: "make the job directory: mkdir .../upper: no such file or
// directory" with two image jobs at once).
func TestConcurrentJobDirsSurvive(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "jobs")
	for round := 0; round < 50; round++ {
		var wg sync.WaitGroup
		dirs := make([]*jobDir, 8)
		errs := make([]error, len(dirs))
		for i := range dirs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dirs[i], errs[i] = newJobDir(parent)
			}()
		}
		wg.Wait()
		for i, d := range dirs {
			if errs[i] != nil {
				t.Fatalf("round %d: newJobDir: %v", round, errs[i])
			}
			for _, sub := range []string{"upper", "work", "root"} {
				if _, err := os.Stat(filepath.Join(d.path, sub)); err != nil {
					t.Fatalf("round %d: a live job's directory was swept: %v", round, err)
				}
			}
		}
		for _, d := range dirs {
			d.remove()
		}
	}
	if left, _ := os.ReadDir(parent); len(left) != 0 {
		t.Errorf("left in the cache's jobs directory: %d entries", len(left))
	}
}
