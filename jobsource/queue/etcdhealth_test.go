package queue_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/berth-ci/berth/internal/etcdtest"
	"github.com/berth-ci/berth/jobsource/queue"
)

// Issue 43, item 5: with etcd gone, /healthz hung for the queue's probe
// (5 s each). Health answers with the last known state while its probe
// waits for etcd, and the probe's failure shows at a later call.
func TestEtcdHealthDoesNotWaitForItsProbe(t *testing.T) {
	c := etcdtest.Start(t, 1) // its own: the test stops it
	q, err := queue.OpenEtcd(context.Background(), c.Client(t), "/health/", nil, queue.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	if err := q.Health(); err != nil {
		t.Fatalf("Health with etcd up: %v", err)
	}
	waitUntil(t, "the first probe to end", func() bool { return !queue.Probing(q) })
	queue.ProbeNow(q)
	c.Stop() // waits until etcd stopped serving
	if err := q.Health(); err != nil {
		t.Fatalf("Health right after etcd stopped: %v, want the last known state (healthy)", err)
	}
	if !queue.Probing(q) {
		t.Fatalf("Health returned after its probe of a stopped etcd: it waited for etcd")
	}
	waitUntil(t, "the probe of the stopped etcd to fail", func() bool { return !queue.Probing(q) })
	if err := q.Health(); err == nil {
		t.Fatalf("Health after the probe of a stopped etcd failed: nil, want the failure")
	}
}

// waitUntil polls cond; the bound is a guard against a hang, not a
// timing assertion.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
