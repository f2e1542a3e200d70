package queue_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/etcdtest"
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
