package queue_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/jobsource/queue"
)

// What one job costs etcd, counted by the queue: a submit, a take, the
// instance recorded, one log chunk and the finish are one transaction
// each, and touch the keys listed (docs/ha.md, "The queue in etcd").
func TestEtcdWritesPerJob(t *testing.T) {
	q := openEtcd(t, newPrefix(t), nil)
	step := func(what string, do func(), txns, puts, dels int64) {
		t.Helper()
		before := q.EtcdStats()
		do()
		after := q.EtcdStats()
		got := queue.EtcdStats{Txns: after.Txns - before.Txns, Puts: after.Puts - before.Puts, Deletes: after.Deletes - before.Deletes}
		if got != (queue.EtcdStats{Txns: txns, Puts: puts, Deletes: dels}) {
			t.Errorf("%s wrote %+v, want %d txns, %d puts, %d deletes", what, got, txns, puts, dels)
		}
	}
	var j *queue.Job
	// seq, record, script, queued-index entry.
	step("submit", func() {
		if _, err := q.Submit(api.JobRequest{Script: "make"}); err != nil {
			t.Fatal(err)
		}
	}, 1, 4, 0)
	// record, running-index entry; the queued entry goes.
	step("take", func() { j = request(t, q) }, 1, 2, 1)
	step("started", func() { j.Started("i-1") }, 1, 1, 0)
	// the log's last chunk is written when the job finishes; then the
	// record, the environment's owner, and the running entry goes.
	step("log and finish", func() {
		j.Log().Write([]byte(strings.Repeat("output\n", 100)))
		if err := j.Finish(context.Background(), jobsource.Result{EnvKey: "env-1"}); err != nil {
			t.Fatal(err)
		}
	}, 2, 3, 1)
}

// BenchmarkSubmitTake measures one submit and one take, on queue.db
// (fsync per commit) and on etcd (one embedded member on loopback, no
// fsync: a real cluster adds its WAL fsync and network round trips).
func BenchmarkSubmitTake(b *testing.B) {
	for _, name := range []string{"bolt", "etcd"} {
		b.Run(name, func(b *testing.B) {
			var q *queue.Queue
			if name == "etcd" {
				q = openEtcd(b, newPrefix(b), nil)
			} else {
				var err error
				q, err = queue.Open(b.TempDir(), queue.WithLogger(slog.New(slog.DiscardHandler)))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { q.Close() })
			}
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				if _, err := q.Submit(api.JobRequest{Script: "make test"}); err != nil {
					b.Fatal(err)
				}
				j, err := q.Request(ctx)
				if err != nil || j == nil {
					b.Fatalf("Request = %v, %v", j, err)
				}
			}
			if name == "etcd" {
				s := q.EtcdStats()
				b.ReportMetric(float64(s.Txns)/float64(b.N), "txns/op")
				b.ReportMetric(float64(s.Puts+s.Deletes)/float64(b.N), "keys/op")
			}
		})
	}
}
