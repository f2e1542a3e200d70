package cache

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A Put's temporary file left by a killed berth is removed at the next
// open once stale; a recent one (a Put in progress) is kept.
func TestLeftoverPutFilesAreSwept(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, ".put-123")
	recent := filepath.Join(dir, ".put-456")
	for _, p := range []string{old, recent} {
		if err := os.WriteFile(p, bytes.Repeat([]byte("x"), 1000), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-time.Hour)
	os.Chtimes(old, past, past)
	l, err := NewLocal(dir, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("a stale .put- file survived the open: %v", err)
	}
	if _, err := os.Stat(recent); err != nil {
		t.Errorf("a .put- file in use was removed: %v", err)
	}
	os.Chtimes(recent, past, past)
	if err := l.Put(context.Background(), "k", bytes.NewReader([]byte("zip"))); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(recent); !os.IsNotExist(err) {
		t.Errorf("a .put- file gone stale survived a Put: %v", err)
	}
}
