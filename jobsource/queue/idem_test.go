package queue_test

import (
	"context"
	"strconv"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource/queue"
)

// A submit sent again with its idempotency key answers with the job it
// made and queues nothing; the key is per owner; a prune frees it.
func TestSubmitOnceWithKey(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		alice := api.Principal{Name: "alice"}
		req := api.JobRequest{Script: "true"}
		first, again, err := q.SubmitOnce(alice, req, "k1")
		if err != nil || again {
			t.Fatalf("first submit: again=%v err=%v", again, err)
		}
		second, again, err := q.SubmitOnce(alice, req, "k1")
		if err != nil || !again || second.ID != first.ID {
			t.Fatalf("second submit with the key: job %s again=%v err=%v, want job %s again", second.ID, again, err, first.ID)
		}
		bob, again, err := q.SubmitOnce(api.Principal{Name: "bob"}, req, "k1")
		if err != nil || again || bob.ID == first.ID {
			t.Fatalf("another owner's submit with the same key: job %s again=%v err=%v", bob.ID, again, err)
		}
		if n, _ := q.Len(); n != 2 {
			t.Fatalf("%d jobs queued, want 2", n)
		}
		if _, _, err := q.SubmitOnce(alice, req, string(make([]byte, 200))); err == nil {
			t.Fatalf("a 200-byte key was accepted")
		}
	})
}

// Two managers on one etcd: IDs never repeat after etcd lost the queue
// (meta/seq gone), because each keeps the highest ID seen in its file.
func TestEtcdIDFloorSurvivesLostSeq(t *testing.T) {
	prefix, dir := newPrefix(t), t.TempDir()
	floor := queue.WithIDFloorFile(dir + "/queue-last-id")
	q := openEtcd(t, prefix, nil, floor)
	var last int
	for range 3 {
		j, err := q.Submit(api.JobRequest{Script: "true"})
		if err != nil {
			t.Fatal(err)
		}
		last, _ = strconv.Atoi(j.ID)
	}
	q.Close()
	cli := etcdClient(t)
	if _, err := cli.Delete(context.Background(), prefix, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	q2 := openEtcd(t, prefix, nil, floor)
	j, err := q2.Submit(api.JobRequest{Script: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := strconv.Atoi(j.ID); n <= last {
		t.Fatalf("after etcd lost the queue the first job is %s, at or below %d", j.ID, last)
	}
}
