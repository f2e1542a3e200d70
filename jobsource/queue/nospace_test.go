package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/etcdtest"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/jobsource/queue"
)

// etcd full (its NOSPACE alarm): the health says etcd's own fix (compact,
// defragment, disarm the alarm), not queue.db's "free disk space" (issue 32).
func TestEtcdNoSpaceHealthSaysEtcdsFix(t *testing.T) {
	c := etcdtest.StartWithQuota(t, 1, 1<<20)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	q, err := queue.OpenEtcd(context.Background(), cli, "/full/", nil, queue.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	big := strings.Repeat("x", 200<<10)
	full := false
	for range 200 {
		if _, err := q.Submit(api.JobRequest{Script: "echo " + big}); errors.Is(err, queue.ErrNoSpace) {
			full = true
			break
		}
	}
	if !full {
		t.Fatal("etcd never answered NOSPACE")
	}
	herr := q.Health()
	if herr == nil {
		t.Fatal("Health is nil with etcd full")
	}
	msg := herr.Error()
	if strings.Contains(msg, "free disk space") || !strings.Contains(msg, "etcdctl defrag") || !strings.Contains(msg, "etcdctl alarm disarm") {
		t.Errorf("health with etcd full: %s", msg)
	}
}

// A job that exited 0 while etcd was full is not recorded failed for the
// log output etcd could not take: Finish keeps the output and fails with
// ErrNoSpace (the manager holds the result and tries again, as for a
// result); once etcd has room, the same Finish records success with the
// whole log (issue 32).
func TestEtcdFullHoldsTheLogLikeTheResult(t *testing.T) {
	c := etcdtest.StartWithQuota(t, 1, 1<<20)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	q, err := queue.OpenEtcd(ctx, cli, "/held/", nil, queue.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	sub, err := q.Submit(api.JobRequest{Script: "echo hello"})
	if err != nil {
		t.Fatal(err)
	}
	j := request(t, q)
	big := strings.Repeat("x", 100<<10)
	for i := 0; ; i++ {
		if _, err := cli.Put(ctx, fmt.Sprintf("/filler/%d", i), big); err != nil {
			if !errors.Is(err, rpctypes.ErrNoSpace) {
				t.Fatal(err)
			}
			break
		}
	}
	j.Log().Write([]byte("hello while etcd is full\n"))
	err = j.Finish(ctx, jobsource.Result{})
	if !errors.Is(err, queue.ErrNoSpace) {
		t.Fatalf("Finish with etcd full: %v, want ErrNoSpace (the result and the log held)", err)
	}
	// etcd's own fix: free, compact, defragment, disarm.
	resp, err := cli.Delete(ctx, "/filler/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Defragment(ctx, c.Endpoints[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
		t.Fatal(err)
	}
	if err := j.Finish(ctx, jobsource.Result{}); err != nil {
		t.Fatalf("Finish once etcd has room: %v", err)
	}
	got, err := q.Get(sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != api.JobSuccess {
		t.Errorf("the job that exited 0 while etcd was full: %s %q, want success", got.State, got.Reason)
	}
	_, hc := serve(t, q)
	var log strings.Builder
	if err := hc.Log(ctx, sub.ID, false, &log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "hello while etcd is full") {
		t.Errorf("the log lost the output written while etcd was full: %q", log.String())
	}
}
