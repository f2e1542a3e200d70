//go:build linux

package local_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/provider/local"
)

// TestRelayThroughput measures a sandbox's PID 1 relaying the output of
// ten jobs at once (capacity_per_instance = 10), over the local exec socket
// and over SSH, with the sandbox's GOMAXPROCS at 1 and at 2: wall time,
// MiB/s, and the CPU of PID 1 and of the whole sandbox (the jobs' own
// processes included). Two kinds of output: bulk (64 KiB writes) and log
// lines (short writes, as a chatty build prints). A measurement, not a
// check:
//
//	BERTH_LOCAL_RELAY_MIB=64 go test ./provider/local -run 'TestRelayThroughput$' -v
func TestRelayThroughput(t *testing.T) {
	mib, _ := strconv.Atoi(os.Getenv("BERTH_LOCAL_RELAY_MIB"))
	if mib <= 0 {
		t.Skip("set BERTH_LOCAL_RELAY_MIB=N to measure ten jobs printing N MiB each")
	}
	quietLogT(t)
	const jobs = 10
	bytes := mib << 20
	scripts := map[string]string{
		"bulk":  fmt.Sprintf("head -c %d /dev/zero", bytes),
		"lines": fmt.Sprintf("yes 'compiling some/package/file.go: a line of build log output' | head -c %d", bytes),
	}
	for round := 0; round < 2; round++ {
		for _, procs := range []string{"1", "2"} {
			restore := local.UseSandboxGOMAXPROCS(procs)
			dir := t.TempDir()
			p := newGroup(t, dir, "")
			id := startOne(t, p)
			restore()
			pid1 := readMeta(t, dir, id).PID
			ci, err := p.ConnectInfo(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"local", "ssh"} {
				ci := transports(t, ci)[name]
				for _, kind := range []string{"bulk", "lines"} {
					cg, init := cgroupCPU(t, dir, id), procCPU(pid1)
					start := time.Now()
					var wg sync.WaitGroup
					var got atomic.Int64
					for range jobs {
						wg.Add(1)
						go func() {
							defer wg.Done()
							var r executor.Runner
							w := &countWriter{n: &got}
							if code, err := r.Run(context.Background(), ci, executor.Command{Script: scripts[kind], Output: w}); err != nil || code != 0 {
								t.Errorf("%s job: %d %v", kind, code, err)
							}
						}()
					}
					wg.Wait()
					took := time.Since(start)
					if got.Load() != int64(jobs*bytes) {
						t.Errorf("%s over %s: got %d bytes, want %d", kind, name, got.Load(), jobs*bytes)
					}
					t.Logf("GOMAXPROCS=%s %-5s %-5s: %d jobs x %d MiB in %v (%.0f MiB/s); CPU: PID 1 %.0f ms, sandbox cgroup %.0f ms",
						procs, name, kind, jobs, mib, took.Round(time.Millisecond), float64(jobs*mib)/took.Seconds(),
						ms(procCPU(pid1)-init), ms(cgroupCPU(t, dir, id)-cg))
				}
			}
			if _, err := p.Decrease(context.Background(), []string{id}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// countWriter counts what the job printed.
type countWriter struct{ n *atomic.Int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}

// procCPU is the CPU time of one process (all its threads, ended ones
// included, not its children) in clock ticks of 10 ms.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var ticks int64
	for _, i := range []int{11, 12} {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
