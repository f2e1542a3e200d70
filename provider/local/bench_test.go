//go:build linux

package local_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
	"github.com/berth-ci/berth/providertest"
)

// BenchmarkBoot measures Increase(1) until the instance's SSH server
// completes a handshake (Heartbeat succeeds). Deletion is not timed.
func BenchmarkBoot(b *testing.B) {
	quietLog(b)
	p := newGroup(b, b.TempDir(), "")
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before := states(b, p)
		if _, err := p.Increase(ctx, 1); err != nil {
			b.Fatal(err)
		}
		var id string
		for got := range states(b, p) {
			if _, ok := before[got]; !ok {
				id = got
			}
		}
		deadline := time.Now().Add(time.Minute)
		for p.Heartbeat(ctx, id) != nil {
			if time.Now().After(deadline) {
				b.Fatalf("%s did not boot", id)
			}
			time.Sleep(time.Millisecond)
		}
		b.StopTimer()
		if _, err := p.Decrease(ctx, []string{id}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// TestScale starts BERTH_LOCAL_SCALE instances at once and logs boot time,
// CPU and memory per instance and deletion time. It is a measurement, not a
// check, so it only runs when asked:
//
//	BERTH_LOCAL_SCALE=100 go test ./provider/local -run 'TestScale$' -v
//
// BERTH_LOCAL_SCALE_FROM lists the binaries to start the sandboxes from, one
// run each, in order (default "berth,berth-sandbox"): "berth-sandbox" the
// lean binary as released, "berth" the whole berth binary (what sandboxes
// run when no berth-sandbox lies beside berth), both built static as
// released; "test" this test binary; an absolute path, the berth-sandbox in
// that directory (kept after the run, for perf to find its symbols).
func TestScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BERTH_LOCAL_SCALE"))
	if n <= 0 {
		t.Skip("set BERTH_LOCAL_SCALE=N to start N instances and measure")
	}
	from := os.Getenv("BERTH_LOCAL_SCALE_FROM")
	if from == "" {
		from = "berth,berth-sandbox"
	}
	for i, bin := range strings.Split(from, ",") {
		binDir := scaleBinary(t, bin)
		t.Run(fmt.Sprintf("%d_%s", i+1, bin), func(t *testing.T) {
			defer local.UseSandboxBinaryDir(binDir)()
			scaleRun(t, n)
		})
	}
}

// scaleBinary returns a directory whose berth-sandbox is the binary named
// by from, built static; for "test", an empty one.
func scaleBinary(t *testing.T, from string) string {
	if filepath.IsAbs(from) {
		return from
	}
	switch from {
	case "test":
		return t.TempDir()
	case "berth":
		return buildSandboxBinaryFrom(t, "../../cmd/berth", "CGO_ENABLED=0")
	case "berth-sandbox":
		return buildSandboxBinaryFrom(t, "../../cmd/berth-sandbox", "CGO_ENABLED=0")
	}
	t.Fatalf("BERTH_LOCAL_SCALE_FROM: unknown binary %q: want berth, berth-sandbox or test", from)
	return ""
}

func scaleRun(t *testing.T, n int) {
	quietLogT(t)
	defer ballast(t)()
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	if exe := local.SandboxExe(p); exe == "/proc/self/exe" {
		t.Logf("sandboxes start from this test binary")
	} else {
		target, _ := os.Readlink(exe)
		t.Logf("sandboxes start from %s", target)
	}
	ctx := context.Background()
	start := time.Now()
	selfBefore := selfCPU()
	if got, err := p.Increase(ctx, n); err != nil || got != n {
		t.Fatalf("Increase(%d) = %d, %v", n, got, err)
	}
	increased := time.Since(start)
	increaseCPU := selfCPU() - selfBefore
	// The spawner (when there is one) does the clones: its CPU is berth's
	// too. It started with this Increase.
	var spawnerCPU time.Duration
	if pid := local.SpawnerPID(p); pid > 0 {
		spawnerCPU = procOwnCPU(pid)
	}
	var ids []string
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ids = ids[:0]
		for id, s := range states(t, p) {
			if s == provider.StateRunning {
				ids = append(ids, id)
			}
		}
		if len(ids) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d running", len(ids), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	allRunning := time.Since(start)
	selfUsed := selfCPU() - selfBefore
	var booted time.Duration
	for _, id := range ids {
		booted += instanceCPU(readMeta(t, dir, id))
	}

	// Every instance answers a real command.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ci, err := p.ConnectInfo(ctx, id)
			if err == nil {
				var res providertest.Result
				res, err = providertest.Exec(ctx, ci, "hostname", nil)
				if err == nil && res.Stdout != id+"\n" {
					err = fmt.Errorf("hostname %q", res.Stdout)
				}
			}
			if err != nil {
				mu.Lock()
				failed = append(failed, id+": "+err.Error())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d instances failed a command: %v", len(failed), failed[:min(5, len(failed))])
	}

	// A listing of n running instances, as the fleet makes one after
	// every state change the provider notifies.
	const listings = 200
	listCPU := selfCPU()
	for range listings {
		p.Update(ctx, func(string, provider.State) {})
	}
	listCPU = selfCPU() - listCPU

	var boot time.Duration
	for _, id := range ids {
		boot += instanceCPU(readMeta(t, dir, id))
	}
	var rss, pss, threads []int
	for _, id := range ids {
		m := readMeta(t, dir, id)
		rss = append(rss, procKB(m.PID, "status", "VmRSS:"))
		pss = append(pss, procKB(m.PID, "smaps_rollup", "Pss:"))
		threads = append(threads, sandboxThreads(m))
	}
	del := time.Now()
	delCPU := selfCPU()
	if _, err := p.Decrease(ctx, ids); err != nil {
		t.Fatal(err)
	}
	deleted := time.Since(del)
	delCPU = selfCPU() - delCPU
	t.Logf("%d instances: Increase returned after %v, all running after %v (%.1f ms/instance), Decrease of all took %v",
		n, increased.Round(time.Millisecond), allRunning.Round(time.Millisecond),
		float64(allRunning.Milliseconds())/float64(n), deleted.Round(time.Millisecond))
	t.Logf("CPU per instance: %.1f ms in the sandbox's processes until serving SSH, %.1f ms after one command (utime+stime, children included), %.1f ms in this process for Increase and the listings",
		float64(booted.Microseconds())/1000/float64(n), float64(boot.Microseconds())/1000/float64(n), float64(selfUsed.Microseconds())/1000/float64(n))
	t.Logf("CPU per instance in this process (berth's side): %.2f ms while Increase ran (creating and starting), plus %.2f ms in the sandbox spawner (10 ms ticks); %.2f ms for Decrease",
		float64(increaseCPU.Microseconds())/1000/float64(n), float64(spawnerCPU.Microseconds())/1000/float64(n), float64(delCPU.Microseconds())/1000/float64(n))
	t.Logf("one Update listing of %d running instances: %.1f µs of CPU (%.2f µs per instance)",
		n, float64(listCPU.Nanoseconds())/1000/listings, float64(listCPU.Nanoseconds())/1000/listings/float64(n))
	t.Logf("idle sandbox memory: RSS median %d KiB (max %d), PSS median %d KiB; host threads per idle sandbox median %d (max %d)", median(rss), maxOf(rss), median(pss), median(threads), maxOf(threads))
	if left, _ := filepath.Glob(filepath.Join(dir, "local", "instances", "*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// selfCPU is this process's user+system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// instanceCPU is the CPU time an instance's processes used so far: its
// cgroup's usage_usec when it has one (exact, and it counts processes that
// are gone), else treeCPU.
func instanceCPU(m instanceMeta) time.Duration {
	if m.Cgroup != "" {
		if b, err := os.ReadFile(filepath.Join(m.Cgroup, "cpu.stat")); err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
					us, _ := strconv.ParseInt(v, 10, 64)
					return time.Duration(us) * time.Microsecond
				}
			}
		}
	}
	return treeCPU(m.PID)
}

// sandboxThreads counts the host threads of an instance: those of its
// cgroup when it has one, else PID 1's. Each costs every later
// pivot_root on the host a step (issue 23).
func sandboxThreads(m instanceMeta) int {
	if m.Cgroup != "" {
		if b, err := os.ReadFile(filepath.Join(m.Cgroup, "cgroup.threads")); err == nil {
			return strings.Count(string(b), "\n")
		}
	}
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", m.PID))
	return len(tasks)
}

// treeCPU is the CPU time (utime+stime, reaped children included) of pid
// and its live children (the sandbox's launcher), in clock ticks of 10 ms.
func treeCPU(pid int) time.Duration {
	ticks := procTicks(pid)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", child)); err == nil {
			f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
			if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
				ticks += procTicks(child)
			}
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// procTicks is utime+stime+cutime+cstime of /proc/PID/stat.
// procOwnCPU is the CPU time pid itself used (utime+stime, no children).
func procOwnCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

func procTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return ticks
}

// procKB reads a "Key: N kB" line of /proc/PID/file.
func procKB(pid int, file, key string) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}

func median(v []int) int {
	if len(v) == 0 {
		return 0
	}
	s := append([]int(nil), v...)
	sort.Ints(s)
	return s[len(s)/2]
}

func maxOf(v []int) int {
	m := 0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// BenchmarkRecycle measures the reset between two jobs as the manager asks
// for it: an SSH handshake and the sandbox killing, wiping and renaming,
// after a job that left a background process and files behind.
func BenchmarkRecycle(b *testing.B) {
	quietLog(b)
	p := newGroup(b, b.TempDir(), "")
	id := startOne(b, p)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		run(b, p, id, "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo x > /tmp/x; echo y > /berth/y")
		b.StartTimer()
		if err := p.Recycle(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// quietLogT keeps the provider's log lines out of a measurement's output.
func quietLogT(t *testing.T) {
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	t.Cleanup(func() { slog.SetDefault(prev) })
}

// quietLog keeps the provider's log lines out of the benchmark's output.
func quietLog(b *testing.B) {
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	b.Cleanup(func() { slog.SetDefault(prev) })
}

// ballast makes this process look like a berth daemon that already runs
// many sandboxes, when BERTH_LOCAL_SCALE_BALLAST=MiB,fds asks for it: MiB
// of touched heap (the page tables a fork copies) and fds open descriptors
// (close-on-exec: every child's exec closes them). It returns the release.
func ballast(t *testing.T) func() {
	v := os.Getenv("BERTH_LOCAL_SCALE_BALLAST")
	if v == "" {
		return func() {}
	}
	mib, fds, _ := strings.Cut(v, ",")
	nmib, err1 := strconv.Atoi(mib)
	nfds, err2 := strconv.Atoi(fds)
	if err1 != nil || err2 != nil {
		t.Fatalf("BERTH_LOCAL_SCALE_BALLAST=%q: want MiB,fds", v)
	}
	heap := make([]byte, nmib<<20)
	for i := 0; i < len(heap); i += 4096 {
		heap[i] = 1
	}
	var files []*os.File
	for range nfds {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	t.Logf("ballast: %d MiB of heap, %d more open descriptors", nmib, nfds)
	return func() {
		for _, f := range files {
			f.Close()
		}
		runtime.KeepAlive(heap)
	}
}
