// Package cache keeps GitLab job caches (cache:key → cache.zip) in berth, so
// that they outlive the instances that made them: with max_use_count = 1
// every job runs on a fresh instance, and a cache kept there would be lost.
// The local store keeps them in a directory (the state dir by default),
// bounded in size, evicting the least recently used.
package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"
)

// ErrNotFound is returned by Get for a key that holds no cache.
var ErrNotFound = errors.New("no cache with this key")

// Store keeps cache archives by key.
type Store interface {
	// Get opens the archive of key; ErrNotFound when there is none.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Put stores r as key's archive, replacing any earlier one.
	Put(ctx context.Context, key string, r io.Reader) error
}

// Local is a Store in a directory with a size bound. It is safe for
// concurrent use; a Put is visible only once complete (write, then rename).
type Local struct {
	dir      string
	maxBytes int64
	log      *slog.Logger
	mu       sync.Mutex
}

// DefaultMaxBytes bounds the local store when no size is configured.
const DefaultMaxBytes = 5 << 30

// NewLocal opens (creating) a local store in dir holding at most maxBytes
// (DefaultMaxBytes when 0).
func NewLocal(dir string, maxBytes int64, log *slog.Logger) (*Local, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	if log == nil {
		log = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cache directory %s: %w", dir, err)
	}
	sweepTemps(dir, time.Now(), log)
	return &Local{dir: dir, maxBytes: maxBytes, log: log}, nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// fileName keeps a readable prefix of the key and a hash of all of it, so
// that keys that sanitise alike do not collide.
func fileName(key string) string {
	sum := sha256.Sum256([]byte(key))
	p := unsafeChars.ReplaceAllString(key, "_")
	if len(p) > 64 {
		p = p[:64]
	}
	return p + "-" + hex.EncodeToString(sum[:8]) + ".zip"
}

// Get opens key's archive and marks it used (eviction is least recently used).
func (l *Local) Get(_ context.Context, key string) (io.ReadCloser, error) {
	p := filepath.Join(l.dir, fileName(key))
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("open cache %q: %w", key, err)
	}
	now := time.Now()
	_ = os.Chtimes(p, now, now)
	return f, nil
}

// Put stores key's archive, then evicts the least recently used archives
// until the store fits its bound. An archive larger than the bound is
// refused.
func (l *Local) Put(_ context.Context, key string, r io.Reader) error {
	tmp, err := os.CreateTemp(l.dir, tempPrefix+"*")
	if err != nil {
		return fmt.Errorf("store cache %q: %w", key, err)
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.LimitReader(r, l.maxBytes+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store cache %q: %w", key, err)
	}
	if n > l.maxBytes {
		return fmt.Errorf("cache %q is larger than the cache size limit of %d bytes; raise [cache] max_size_mb or cache fewer paths", key, l.maxBytes)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := os.Rename(tmp.Name(), filepath.Join(l.dir, fileName(key))); err != nil {
		return fmt.Errorf("store cache %q: %w", key, err)
	}
	return l.evict()
}

// evict removes least recently used archives until the total fits.
func (l *Local) evict() error {
	sweepTemps(l.dir, time.Now(), l.log)
	ents, err := os.ReadDir(l.dir)
	if err != nil {
		return err
	}
	type file struct {
		name string
		size int64
		used time.Time
	}
	var files []file
	var total int64
	for _, e := range ents {
		if e.IsDir() || filepath.Ext(e.Name()) != ".zip" {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		files = append(files, file{e.Name(), fi.Size(), fi.ModTime()})
		total += fi.Size()
	}
	sort.Slice(files, func(i, j int) bool { return files[i].used.Before(files[j].used) })
	for _, f := range files {
		if total <= l.maxBytes {
			break
		}
		if err := os.Remove(filepath.Join(l.dir, f.name)); err != nil {
			return err
		}
		total -= f.size
		l.log.Info("cache evicted", "file", f.name, "bytes", f.size, "total", total, "max_bytes", l.maxBytes)
	}
	return nil
}
