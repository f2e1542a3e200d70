//go:build linux

package local_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider/local"
)

// A sandbox with disk_max reports to berth's disk poller instead of polling
// the free space itself, is still stopped when a job writes past the
// limit, and leaves the poller when it is deleted.
func TestSandboxReportsToBerthsDiskPoller(t *testing.T) {
	dir := t.TempDir()
	p := newGroup(t, dir, `{"disk_max": "64M"}`)
	id := startOne(t, p)
	if n := local.DiskPolled(p); n != 1 {
		t.Fatalf("the disk poller serves %d sandboxes, want 1", n)
	}
	res := run(t, p, id, "head -c 300M /dev/zero > /berth/big; sleep 10; echo survived")
	if strings.Contains(res.Stdout, "survived") || !strings.Contains(res.Stderr, "disk_max") {
		t.Fatalf("a job writing 300M past disk_max 64M was not stopped: %+v", res)
	}
	if _, err := p.Decrease(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for local.DiskPolled(p) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the deleted sandbox is still served by the disk poller")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
