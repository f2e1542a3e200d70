package console

import (
	"io/fs"
	"strings"
	"testing"
)

// TestPageWeight keeps the console light: everything a browser loads for
// a page (HTML, script, style, the chart library) stays under 300 KB, and
// nothing is fetched from elsewhere.
func TestPageWeight(t *testing.T) {
	total := 0
	err := fs.WalkDir(assets, "assets", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, "LICENSE") || strings.HasSuffix(path, "login.html") {
			return err
		}
		b, err := fs.ReadFile(assets, path)
		if err != nil {
			return err
		}
		total += len(b)
		if s := string(b); strings.Contains(s, "https://") && !strings.HasPrefix(s, "/*! https://github.com/leeoniya/uPlot") {
			t.Errorf("%s refers to another site: the console must load nothing from a CDN", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > 300<<10 {
		t.Errorf("the console page weighs %d KB; keep it under 300 KB", total>>10)
	}
	t.Logf("page weight %d KB", total>>10)
}
