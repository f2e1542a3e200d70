package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource/queue"
)

// Issue 43: etcd restored from a snapshot taken after job 2 was issued,
// while this manager saw job 3 (its ID floor). The queue says it is the
// past; AcceptPast records job 3 failed with the restore's reason (it
// answers, never 404), fails the jobs the snapshot holds queued (they may
// have run since), raises meta/seq, and changes nothing when run again.
func TestEtcdRestoredQueueIsThePastUntilAccepted(t *testing.T) {
	prefix, dir := newPrefix(t), t.TempDir()
	floor := queue.WithIDFloorFile(dir + "/queue-last-id")
	q := openEtcd(t, prefix, nil, floor)
	for range 3 {
		if _, err := q.Submit(api.JobRequest{Script: "true"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.CheckPresent(context.Background()); err != nil {
		t.Fatalf("the present taken for the past: %v", err)
	}
	// The snapshot: meta/seq at 2, job 3 not yet there.
	cli := etcdClient(t)
	bg := context.Background()
	for _, b := range []string{"jobs", "scripts", "queued"} {
		if _, err := cli.Delete(bg, fmt.Sprintf("%s%s/%020d", prefix, b, 3)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Put(bg, prefix+"meta/seq", "2"); err != nil {
		t.Fatal(err)
	}
	var pe *queue.PastError
	if err := q.CheckPresent(bg); !errors.As(err, &pe) || pe.Seq != 2 || pe.Seen != 3 {
		t.Fatalf("CheckPresent on the restored queue: %v, want a PastError 2 < 3", err)
	}
	// A submit that lands before the leader's next check is refused: had
	// it taken job 4, meta/seq would be 4, above the floor, the past would
	// be hidden and job 3 would answer 404 for ever.
	if j, err := q.Submit(api.JobRequest{Script: "true"}); !errors.As(err, &pe) {
		t.Fatalf("a submit on the restored queue: job %q, %v; want a PastError", j.ID, err)
	}
	if err := q.CheckPresent(bg); !errors.As(err, &pe) || pe.Seq != 2 {
		t.Fatalf("CheckPresent after the refused submit: %v, want the past still seen (meta/seq 2)", err)
	}
	q.Close()

	// A restarted manager knows it from its floor file.
	q = openEtcd(t, prefix, nil, floor)
	if err := q.CheckPresent(bg); !errors.As(err, &pe) {
		t.Fatalf("CheckPresent after a restart: %v, want a PastError", err)
	}
	done, err := q.AcceptPast(bg)
	if err != nil {
		t.Fatal(err)
	}
	if done.Missing != 1 || done.Stale != 2 {
		t.Fatalf("AcceptPast = %+v, want 1 missing and 2 stale", done)
	}
	for _, id := range []string{"1", "2", "3"} {
		j, err := q.Get(id)
		if err != nil || j.State != api.JobFailed || j.Reason != queue.RestoreReason {
			t.Fatalf("job %s after the restore was accepted: %+v, %v", id, j, err)
		}
	}
	if n, _ := q.Len(); n != 0 {
		t.Fatalf("%d jobs still queued", n)
	}
	if err := q.CheckPresent(bg); err != nil {
		t.Fatalf("CheckPresent after the restore was accepted: %v", err)
	}
	if again, err := q.AcceptPast(bg); err != nil || again.Missing != 0 || again.Stale != 0 {
		t.Fatalf("AcceptPast again = %+v, %v: want nothing done", again, err)
	}
	j, err := q.Submit(api.JobRequest{Script: "true"})
	if err != nil || j.ID != "4" {
		t.Fatalf("the next job: %q, %v, want job 4", j.ID, err)
	}
	if resp, _ := cli.Get(bg, prefix+"queued/", clientv3.WithPrefix(), clientv3.WithCountOnly()); resp.Count != 1 {
		t.Fatalf("%d queued entries, want the new job's", resp.Count)
	}
}
