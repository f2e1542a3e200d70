package cache

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestLocalEvictsLeastRecentlyUsed(t *testing.T) {
	dir := t.TempDir()
	l, err := NewLocal(dir, 25, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(k string) {
		t.Helper()
		if err := l.Put(ctx, k, strings.NewReader(strings.Repeat("x", 10))); err != nil {
			t.Fatal(err)
		}
	}
	put("a")
	put("b")
	// Make a older than b, then use a: b becomes the least recently used.
	old := time.Now().Add(-time.Hour)
	os.Chtimes(dir+"/"+fileName("a"), old, old)
	os.Chtimes(dir+"/"+fileName("b"), old.Add(time.Minute), old.Add(time.Minute))
	rc, err := l.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	put("c") // 30 bytes > 25: evict b
	if _, err := l.Get(ctx, "b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("b: %v, want evicted", err)
	}
	for _, k := range []string{"a", "c"} {
		rc, err := l.Get(ctx, k)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		if len(b) != 10 {
			t.Errorf("%s holds %d bytes", k, len(b))
		}
	}
	if err := l.Put(ctx, "huge", strings.NewReader(strings.Repeat("x", 26))); err == nil || !strings.Contains(err.Error(), "max_size") {
		t.Errorf("an archive over the bound: %v", err)
	}
}

func TestKeysDoNotCollide(t *testing.T) {
	if fileName("a/b") == fileName("a_b") {
		t.Error("keys that sanitise alike share a file")
	}
}
