package queue_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/boltfile"
	"github.com/berth-ci/berth/jobsource/queue"
)

// A damaged queue.db is refused before anything writes to it, with its
// name, what is wrong and how to get the last good copy back; the restore
// brings the queued jobs back.
func TestDamagedQueueIsRefusedAndRestoredFromTheBackup(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, tc := range []struct {
		name   string
		damage func(path string)
		want   string
	}{
		{"0 bytes", func(p string) { os.Truncate(p, 0) }, "is empty (0 bytes)"},
		{"truncated to 10000 bytes", func(p string) { os.Truncate(p, 10000) }, "is truncated"},
		{"random meta pages", func(p string) { scribble(p, 0, 8192, r) }, "both meta pages are damaged"},
		{"random data pages", func(p string) {
			fi, _ := os.Stat(p)
			scribble(p, 8192, fi.Size()-8192, r)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "queue")
			q, err := queue.Open(dir, queue.WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			for range 20 {
				if _, err := q.Submit(api.JobRequest{Script: strings.Repeat("echo queued; ", 100)}); err != nil {
					t.Fatal(err)
				}
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "queue.db")
			tc.damage(path)
			before, _ := os.ReadFile(path)

			_, err = queue.Open(dir, queue.WithLogger(slog.New(slog.DiscardHandler)))
			var ce *boltfile.CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("open a damaged queue: %v, want it refused as corrupt", err)
			}
			for _, want := range []string{path, tc.want, "has not written to it", "berth state restore", "queue.db.bak", "queued job"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Fatal("the refused file was written to")
			}

			if _, err := boltfile.Restore(path); err != nil {
				t.Fatal(err)
			}
			q = openQueue(t, dir)
			jobs, err := q.List(api.JobQueued, 0)
			if err != nil || len(jobs) != 20 {
				t.Fatalf("after restore: %d queued jobs (%v), want 20", len(jobs), err)
			}
			if j, err := q.Request(context.Background()); j == nil || err != nil {
				t.Fatalf("take a restored job: %v %v", j, err)
			}
		})
	}
}

func scribble(path string, off, n int64, r *rand.Rand) {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	f, _ := os.OpenFile(path, os.O_WRONLY, 0)
	f.WriteAt(b, off)
	f.Close()
}
