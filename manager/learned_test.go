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
	"github.com/berth-ci/berth/store"
)

// runLearning runs a manager on state dir state until its jobs are done,
// then stops it, and returns its log.
func runLearning(t *testing.T, dir string, jobs int) string {
	t.Helper()
	full := fmt.Sprintf(`listen = "127.0.0.1:0"
state_dir = %q
[autoscaler]
max_instances = 2
[[autoscaler.policy]]
idle_count = 1
idle_time = "1m"
`, filepath.Join(dir, "state"))
	cfg, err := config.Parse([]byte(full), filepath.Join(dir, "berth.toml"))
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := New(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil)), Options{ShutdownGrace: 10 * time.Second, UpdateInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range jobs {
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
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("manager stopped at start: %v\n%s", err, logs)
	}
	waitQueueJobsSucceed(t, m, ids, logs)
	cancel() // a stop, as SIGTERM: the learned state is saved at stop
	if err := <-done; err != nil {
		t.Fatalf("manager stopped with %v\n%s", err, logs)
	}
	return logs.String()
}

// TestRestartKeepsLearnedState: what the policy learned beyond the profile
// (here the run times of the jobs, scaler/learned.go) is saved in the state
// store at stop and restored by the next start on the same state, which
// says so in its "restored state" line. On main the store had no such
// record: a restarted berth relearned the run times from scratch.
func TestRestartKeepsLearnedState(t *testing.T) {
	dir := t.TempDir()
	t.Cleanup(func() { deleteSandboxes(t, filepath.Join(dir, "state", "provider", "local")) })
	runLearning(t, dir, 3)

	b, err := store.Open(filepath.Join(dir, "state", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	st, ok, err := b.Load()
	b.Close()
	if err != nil || !ok {
		t.Fatalf("load the stopped manager's state: ok=%v err=%v", ok, err)
	}
	if st.Learned == nil || st.Learned.RunsN != 3 {
		t.Fatalf("learned state saved at stop = %+v, want the run times of 3 jobs", st.Learned)
	}

	logs := runLearning(t, dir, 1)
	if !strings.Contains(logs, `msg="restored state"`) || !strings.Contains(logs, "learned_run_times=3 ") {
		t.Fatalf("the restart did not restore the 3 run times learned before it:\n%s", logs)
	}
	b, err = store.Open(filepath.Join(dir, "state", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if st, _, err = b.Load(); err != nil || st.Learned == nil || st.Learned.RunsN != 4 {
		t.Fatalf("learned state after the second run = %+v (%v), want the run times of 3 + 1 jobs", st.Learned, err)
	}
}
