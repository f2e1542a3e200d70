//go:build linux

package local_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
)

// TestLocalExecFootprint compares the two ways the executor reaches a
// sandbox this process started, SSH and the local exec socket, with N
// sandboxes: CPU for one command (in the sandbox's cgroup and in berth),
// and goroutines and memory in berth per running command while N `sleep`
// jobs run at once. A measurement, not a check:
//
//	BERTH_LOCAL_EXEC_SCALE=100 go test ./provider/local -run 'TestLocalExecFootprint$' -v
//
// BERTH_LOCAL_EXEC_GOMAXPROCS=N gives the sandboxes another GOMAXPROCS.
func TestLocalExecFootprint(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BERTH_LOCAL_EXEC_SCALE"))
	if n <= 0 {
		t.Skip("set BERTH_LOCAL_EXEC_SCALE=N to measure with N sandboxes")
	}
	if v := os.Getenv("BERTH_LOCAL_EXEC_GOMAXPROCS"); v != "" {
		defer local.UseSandboxGOMAXPROCS(v)() // to compare with the default
	}
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	ctx := context.Background()
	if got, err := p.Increase(ctx, n); err != nil || got != n {
		t.Fatalf("Increase(%d) = %d, %v", n, got, err)
	}
	var ids []string
	waitFor(t, func() bool {
		ids = ids[:0]
		for id, s := range states(t, p) {
			if s == provider.StateRunning {
				ids = append(ids, id)
			}
		}
		return len(ids) == n
	})
	var boot time.Duration
	for _, id := range ids {
		boot += cgroupCPU(t, dir, id)
	}
	t.Logf("%d sandboxes: %.2f ms CPU per sandbox boot (cgroup)", n, ms(boot)/float64(n))
	for _, name := range []string{"ssh", "local", "ssh", "local"} {
		cis := make([]provider.ConnectInfo, len(ids))
		for i, id := range ids {
			ci, err := p.ConnectInfo(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			cis[i] = transports(t, ci)[name]
		}
		oneCommand(t, dir, ids, cis, name)
		running(t, cis, name)
	}
}

// oneCommand runs `hostname` once on every sandbox and logs the CPU it took.
func oneCommand(t *testing.T, dir string, ids []string, cis []provider.ConnectInfo, name string) {
	var before time.Duration
	for _, id := range ids {
		before += cgroupCPU(t, dir, id)
	}
	self := selfCPUTime()
	var r executor.Runner
	var wg sync.WaitGroup
	for i := range cis {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			if code, err := r.Run(context.Background(), cis[i], executor.Command{Script: "hostname", Output: &out}); err != nil || code != 0 || out.String() != ids[i]+"\n" {
				t.Errorf("%s: hostname on %s: %d %v %q", name, ids[i], code, err, out.String())
			}
		}()
	}
	wg.Wait()
	selfUsed := selfCPUTime() - self
	var after time.Duration
	for _, id := range ids {
		after += cgroupCPU(t, dir, id)
	}
	n := float64(len(ids))
	t.Logf("%-5s one command: %.2f ms CPU in the sandbox, %.2f ms in berth", name, ms(after-before)/n, ms(selfUsed)/n)
}

// running starts a `sleep` job on every sandbox, measures berth while they
// all run, then cancels them.
func running(t *testing.T, cis []provider.ConnectInfo, name string) {
	base, baseMem := settle()
	var r executor.Runner
	ctx, cancel := context.WithCancel(context.Background())
	var started sync.WaitGroup
	var done sync.WaitGroup
	for _, ci := range cis {
		started.Add(1)
		done.Add(1)
		out := &startSignal{started: &started}
		go func() {
			defer done.Done()
			_, err := r.Run(ctx, ci, executor.Command{Script: "echo started; exec sleep 1000", Output: out})
			if err == nil || !strings.Contains(err.Error(), "canceled") {
				t.Errorf("%s: sleep job: %v, want canceled", name, err)
			}
		}()
	}
	started.Wait()
	g, mem := settle()
	cancel()
	done.Wait()
	n := float64(len(cis))
	t.Logf("%-5s %d running jobs: %.2f goroutines and %.1f KiB (heap in use + stacks) per job in berth, the job's own goroutine included",
		name, len(cis), float64(g-base)/n, float64(mem-baseMem)/1024/n)
}

// settle collects garbage and returns the goroutines and the memory in
// use (heap in use and stacks).
func settle() (int, int64) {
	var st runtime.MemStats
	for range 2 {
		runtime.GC()
	}
	time.Sleep(100 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&st)
	return runtime.NumGoroutine(), int64(st.HeapInuse + st.StackInuse)
}

// startSignal marks its job started on the first output.
type startSignal struct {
	once    sync.Once
	started *sync.WaitGroup
}

func (s *startSignal) Write(p []byte) (int, error) {
	s.once.Do(s.started.Done)
	return len(p), nil
}

// cgroupCPU is the CPU the instance's cgroup used so far.
func cgroupCPU(t *testing.T, dir, id string) time.Duration {
	t.Helper()
	m := readMeta(t, dir, id)
	if m.Cgroup == "" {
		t.Skip("no cgroup per instance: cannot measure sandbox CPU")
	}
	b, err := os.ReadFile(filepath.Join(m.Cgroup, "cpu.stat"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, _ := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond
		}
	}
	t.Fatalf("no usage_usec in %s/cpu.stat", m.Cgroup)
	return 0
}

func selfCPUTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
