package queue_test

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource/queue"
)

// BenchmarkSubmitOverHTTP submits b.N jobs over the API from 32 clients at
// once into a bbolt queue, as `berth submit` from many CI pipelines does:
// the submits share commits (bbolt.Batch), and anything done per job under
// the queue's write lock is a serial step between submit and running
// (issue 23).
func BenchmarkSubmitOverHTTP(b *testing.B) {
	q, err := queue.Open(b.TempDir(), queue.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	srv, c := serve(b, q)
	defer srv.Close()
	c.HTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	b.ResetTimer()
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := c.Submit(context.Background(), api.JobRequest{Script: "exec sleep 7201"}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
