package images

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// BenchmarkColdPull50MB pulls and unpacks a 50 MB image (50 files of 1 MB
// random data, so gzip cannot shrink it) from a registry in the process
// into an empty cache, and reports the cache's disk use.
func BenchmarkColdPull50MB(b *testing.B) { coldPull(b, nil) }

// BenchmarkColdPull50MBChown is the pull berth does on the host for a
// local instance when it runs as root: every file is given to the
// sandbox's root.
func BenchmarkColdPull50MBChown(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("giving files to another user needs root")
	}
	coldPull(b, &Owner{UID: 1 << 30, GID: 1 << 30})
}

func coldPull(b *testing.B, owner *Owner) {
	r := newRegistry(b, nil)
	ref := r.push(b, "big:1", buildImage(b, nil, randomLayer(b, 25, 1<<20), randomLayer(b, 25, 1<<20)))
	b.SetBytes(50 << 20)
	var disk int64
	for b.Loop() {
		b.StopTimer()
		c := r.openCache(b, func(cfg *Config) { cfg.Owner = owner })
		b.StartTimer()
		im, err := c.Get(ctx, ref, nil)
		if err != nil {
			b.Fatal(err)
		}
		im.Release()
		b.StopTimer()
		disk = du(c.cfg.Dir)
		os.RemoveAll(c.cfg.Dir)
		b.StartTimer()
	}
	b.ReportMetric(float64(disk)/1e6, "disk-MB/image")
}

// BenchmarkWarmGet finds a cached image (pull_policy if-not-present).
func BenchmarkWarmGet(b *testing.B) {
	r := newRegistry(b, nil)
	ref := r.push(b, "big:1", buildImage(b, nil, randomLayer(b, 10, 1<<20)))
	c := r.openCache(b, nil)
	if im, err := c.Get(ctx, ref, nil); err != nil {
		b.Fatal(err)
	} else {
		im.Release()
	}
	for b.Loop() {
		im, err := c.Get(ctx, ref, nil)
		if err != nil {
			b.Fatal(err)
		}
		im.Release()
	}
}

// du is the disk space the files under dir take (allocated blocks).
func du(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			} else {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
