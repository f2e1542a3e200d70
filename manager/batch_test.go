package manager

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/scaler"
)

// A burst of queued jobs larger than the fleet: the job loop books and
// takes them in batches no larger than the free slots, every job runs on
// real sandboxes, and no booking is left over once they are done.
func TestBurstOfQueuedJobsIsTakenInBatches(t *testing.T) {
	dir := t.TempDir()
	full := fmt.Sprintf(`listen = "127.0.0.1:0"
state_dir = %q
[autoscaler]
max_instances = 2
capacity_per_instance = 2
[[autoscaler.policy]]
idle_count = 0
idle_time = "1m"
preemptive_mode = false
`, filepath.Join(dir, "state"))
	cfg, err := config.Parse([]byte(full), filepath.Join(dir, "berth.toml"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	m, err := New(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil)), Options{ShutdownGrace: 10 * time.Second, UpdateInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// Queued before the job loop starts, so that its first round sees all.
	var ids []string
	for i := range 9 {
		j, err := m.queue.Submit(api.JobRequest{Script: fmt.Sprintf("echo job %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	ready := make(chan string, 1)
	m.opts.Ready = ready
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		deleteSandboxes(t, filepath.Join(dir, "state", "provider", "local"))
	})
	<-ready

	waitQueueJobsSucceed(t, m, ids, logs)
	if !strings.Contains(logs.String(), `msg="jobs taken in one step" source=queue jobs=4 booked=4 queued=9 refused="no capacity (max_instances)`) {
		t.Fatalf("the first round did not book the 4 slots and take 4 jobs in one step:\n%s", logs)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		c := m.fleet.Counts()
		if c.Unbound == 0 && c.Slots[scaler.SlotReserved] == 0 && c.Slots[scaler.SlotAcquired] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bookings left after every job finished: %+v", c)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitQueueJobsSucceed waits until every job in ids ended, and fails the
// test on one that did not succeed. The 3-minute bound guards against a
// hang; it is not a timing assertion.
func waitQueueJobsSucceed(t *testing.T, m *Manager, ids []string, logs fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for _, id := range ids {
		for {
			j, err := m.queue.Get(id)
			if err != nil {
				t.Fatal(err)
			}
			if j.State.Done() {
				if j.State != api.JobSuccess {
					t.Fatalf("job %s ended %s (%s); want success\n%s", id, j.State, j.Reason, logs)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s still %s after 3 minutes\n%s", id, j.State, logs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
