package manager

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/config"
)

// BenchmarkSubmitToRunning measures berth's start path: N jobs queued
// before the manager starts, on the local provider's real sandboxes (ten
// jobs per sandbox, so that berth's own work, not the boots, weighs most),
// timed from Run until every job is running. Issue 43 found the path 40 %
// slower without a number to show where; cpu-ms/job is berth's own CPU
// (this process: manager, queue, fleet, core and the provider's side),
// which a loaded machine changes far less than the wall time:
//
//	go test -run '^$' -bench SubmitToRunning -benchtime 3x ./manager
func BenchmarkSubmitToRunning(b *testing.B) {
	// The cleanup's provider logs through the default logger: keep the
	// benchmark's lines readable.
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, n := range []int{100, 400} {
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			var cpu time.Duration
			for range b.N {
				cpu += submitToRunning(b, n)
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N*n), "cpu-ms/job")
		})
	}
}

// submitToRunning runs one round and returns the CPU this process used
// from Run until all n jobs ran; only that span is timed.
func submitToRunning(b *testing.B, n int) time.Duration {
	b.StopTimer()
	dir := b.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`listen = "127.0.0.1:0"
state_dir = %q
[autoscaler]
max_instances = %d
capacity_per_instance = 10
[[autoscaler.policy]]
idle_count = 0
idle_time = "1m"
preemptive_mode = false
`, filepath.Join(dir, "state"), (n+9)/10)), filepath.Join(dir, "berth.toml"))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer deleteSandboxes(b, filepath.Join(dir, "state", "provider", "local"))
	m, err := New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{ShutdownGrace: time.Second, UpdateInterval: 500 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		j, err := m.queue.Submit(api.JobRequest{Script: "sleep 60"})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = j.ID
	}
	done := make(chan error, 1)
	defer func() { cancel(); <-done }()
	before := selfCPU(b)
	b.StartTimer()
	go func() { done <- m.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Minute)
	for _, id := range ids {
		for {
			j, err := m.queue.Get(id)
			if err != nil {
				b.Fatal(err)
			}
			if j.State == api.JobRunning {
				break
			}
			if j.State.Done() || time.Now().After(deadline) {
				b.Fatalf("job %s is %s (%s); want running within 5 minutes", id, j.State, j.Reason)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	b.StopTimer()
	return selfCPU(b) - before
}

// selfCPU is the user and system CPU this process has used.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
