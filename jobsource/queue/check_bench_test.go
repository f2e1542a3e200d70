package queue_test

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/boltfile"
	"github.com/berth-ci/berth/jobsource/queue"
)

// BenchmarkCheckQueueWithRecords measures the check berth runs on queue.db
// at every start and on each backup copy since issue 19: bbolt's structure
// plus a decode and checksum of every record, here 10,000 jobs.
func BenchmarkCheckQueueWithRecords(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "queue")
	q, err := queue.Open(dir, queue.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	script := strings.Repeat("echo a typical CI line; ", 40)
	for range 10000 {
		if _, err := q.Submit(api.JobRequest{Script: script, Env: map[string]string{"CI": "1"}}); err != nil {
			b.Fatal(err)
		}
	}
	q.Close()
	path := filepath.Join(dir, "queue.db")
	b.Run("structure", func(b *testing.B) {
		for b.Loop() {
			if err := boltfile.Check(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("structure+records", func(b *testing.B) {
		for b.Loop() {
			if err := boltfile.Check(path, queue.CheckRecord); err != nil {
				b.Fatal(err)
			}
		}
	})
}
