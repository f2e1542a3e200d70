//go:build linux

package local_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
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
// memory per instance and deletion time. It is a measurement, not a check,
// so it only runs when asked: BERTH_LOCAL_SCALE=100 go test -run Scale -v.
func TestScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BERTH_LOCAL_SCALE"))
	if n <= 0 {
		t.Skip("set BERTH_LOCAL_SCALE=N to start N instances and measure")
	}
	dir := t.TempDir()
	p := newGroup(t, dir, "")
	ctx := context.Background()
	start := time.Now()
	if got, err := p.Increase(ctx, n); err != nil || got != n {
		t.Fatalf("Increase(%d) = %d, %v", n, got, err)
	}
	increased := time.Since(start)
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

	var rss, pss []int
	for _, id := range ids {
		m := readMeta(t, dir, id)
		rss = append(rss, procKB(m.PID, "status", "VmRSS:"))
		pss = append(pss, procKB(m.PID, "smaps_rollup", "Pss:"))
	}
	del := time.Now()
	if _, err := p.Decrease(ctx, ids); err != nil {
		t.Fatal(err)
	}
	deleted := time.Since(del)
	t.Logf("%d instances: Increase returned after %v, all running after %v (%.1f ms/instance), Decrease of all took %v",
		n, increased.Round(time.Millisecond), allRunning.Round(time.Millisecond),
		float64(allRunning.Milliseconds())/float64(n), deleted.Round(time.Millisecond))
	t.Logf("idle sandbox memory: RSS median %d KiB (max %d), PSS median %d KiB", median(rss), maxOf(rss), median(pss))
	if left, _ := filepath.Glob(filepath.Join(dir, "local", "instances", "*")); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
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

// quietLog keeps the provider's log lines out of the benchmark's output.
func quietLog(b *testing.B) {
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	b.Cleanup(func() { slog.SetDefault(prev) })
}
