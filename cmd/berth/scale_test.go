package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// The scale test: BERTH_SCALE=JOBS[/INSTANCES],... starts the real berth
// binary on the local provider, submits JOBS `sleep` jobs over the API from
// 32 clients, waits until every one of them runs (on INSTANCES sandboxes,
// JOBS by default, each with capacity JOBS/INSTANCES) and reports what the
// daemon costs while they run: OS threads, RSS per running job, open
// descriptors, CPU, and the time from the first submit to all running.
//
//	BERTH_SCALE=1000,3000/300 go test ./cmd/berth -run TestScale -v -timeout 30m
//
// It is skipped by default: 1,000 sandboxes take minutes and gigabytes. It
// checks nothing but that every job runs; the figures are for people (see
// docs/scale.md). BERTH_SCALE_THROTTLE sets scale_throttle's limit and
// burst (default 1000 instances per second, so that the throttle is not
// what is measured). BERTH_SCALE_WARM=1 boots every sandbox first (an
// idle_count policy, as a warm pool keeps them) and measures from the
// first submit on a fleet that is ready. The berth binary is built
// static, as released (BERTH_SCALE_CGO=1 for go build's default).
func TestScale(t *testing.T) {
	spec := os.Getenv("BERTH_SCALE")
	if spec == "" {
		t.Skip("set BERTH_SCALE=JOBS[/INSTANCES],... to measure berth with that many running jobs (minutes, gigabytes)")
	}
	useReleaseBuild(t)
	for _, run := range strings.Split(spec, ",") {
		jobs, instances, err := parseScale(run)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(fmt.Sprintf("%djobs_%dinstances", jobs, instances), func(t *testing.T) {
			scaleRun(t, jobs, instances)
		})
	}
}

// useReleaseBuild builds berth and berth-sandbox into one directory the
// way packaging/release.sh does for the scale runs. Static (CGO_ENABLED=0)
// unless BERTH_SCALE_CGO=1: every sandbox executes its binary twice (its
// PID 1 and its image launcher), and a dynamically linked one pays the
// dynamic loader and the C library's start-up (CPU feature probing that
// traps to the hypervisor on a VM) each time: ~2 ms of a sandbox's ~12 ms
// boot. With berth-sandbox beside berth, sandboxes start from it and skip
// the package initialisation of everything else berth links;
// BERTH_SCALE_SANDBOX=0 leaves it out to measure sandboxes started from
// berth's own binary.
func useReleaseBuild(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	cgo := os.Getenv("BERTH_SCALE_CGO") == "1"
	lean := os.Getenv("BERTH_SCALE_SANDBOX") != "0"
	build := func(name, pkg string) {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg)
		if !cgo {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	build("berth", ".")
	if lean {
		build("berth-sandbox", "../berth-sandbox")
	}
	prev := berthBin
	berthBin = filepath.Join(dir, "berth")
	t.Cleanup(func() { berthBin = prev })
	t.Logf("scale runs use berth built with cgo %v (BERTH_SCALE_CGO=1 for go build's default; releases are static), berth-sandbox beside it %v (BERTH_SCALE_SANDBOX=0 to leave it out)", cgo, lean)
}

// parseScale reads "JOBS" or "JOBS/INSTANCES".
func parseScale(s string) (jobs, instances int, err error) {
	js, is, two := strings.Cut(strings.TrimSpace(s), "/")
	if jobs, err = strconv.Atoi(js); err != nil || jobs < 1 {
		return 0, 0, fmt.Errorf("BERTH_SCALE entry %q: want JOBS or JOBS/INSTANCES, e.g. 1000 or 3000/300", s)
	}
	instances = jobs
	if two {
		if instances, err = strconv.Atoi(is); err != nil || instances < 1 || instances > jobs {
			return 0, 0, fmt.Errorf("BERTH_SCALE entry %q: INSTANCES must be between 1 and JOBS", s)
		}
	}
	return jobs, instances, nil
}

func scaleRun(t *testing.T, jobs, instances int) {
	capacity := (jobs + instances - 1) / instances
	throttle := 1000
	if v, err := strconv.Atoi(os.Getenv("BERTH_SCALE_THROTTLE")); err == nil && v > 0 {
		throttle = v
	}
	warm := os.Getenv("BERTH_SCALE_WARM") == "1"
	idleCount, idleTime := 0, "1m"
	if warm {
		idleCount, idleTime = instances*capacity, "1h"
	}
	d := newDaemon(t, fmt.Sprintf(`job_timeout = "1h"
[autoscaler]
max_instances = %d
capacity_per_instance = %d
instance_acquire_timeout = "10m"
[autoscaler.scale_throttle]
limit = %d
burst = %d
[[autoscaler.policy]]
idle_count = %d
idle_time = %q
`, instances, capacity, throttle, throttle, idleCount, idleTime))
	if warm {
		waitWarm(t, d, instances)
	}
	pid := d.cmd.Process.Pid
	idle := sampleProc(t, pid)
	idleChildren := childrenCPUTicks(pid)
	t.Logf("idle berth: %s", idle)

	c := d.client()
	c.HTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	start := time.Now()
	submitAll(t, c, jobs)
	submitted := time.Since(start)
	allRunning := waitRunning(t, d, jobs, start)
	running := sampleProc(t, pid)
	spawnerTicks := childrenCPUTicks(pid) - idleChildren
	// Let the start-up garbage be collected and the sockets settle before
	// sampling; CPU is measured over a quiet window after that.
	time.Sleep(10 * time.Second)
	before := sampleProc(t, pid)
	const window = 20 * time.Second
	time.Sleep(window)
	after := sampleProc(t, pid)
	cpu := float64(after.cpuTicks-before.cpuTicks) / clockTicks / window.Seconds()

	perJob := float64(after.rss) / float64(jobs)
	delta := float64(after.rss-idle.rss) / float64(jobs)
	t.Logf("SCALE %d jobs on %d instances (capacity %d): submit %s, submit -> all running %.1fs; "+
		"berth: %d threads, RSS %.0f MiB (%.0f KiB per running job, %.0f KiB above idle), %d fds (%.2f per job), CPU %.3f cores",
		jobs, instances, capacity, submitted.Round(time.Millisecond), allRunning.Seconds(),
		after.threads, float64(after.rss)/(1<<20), perJob/1024, delta/1024, after.fds, float64(after.fds)/float64(jobs), cpu)
	// File-backed pages (berth's own binary) are clean and shared with the
	// page cache; the anonymous ones are what the jobs cost.
	t.Logf("SCALE RSS split: idle %.1f MiB anonymous + %.1f MiB file-backed; running %.1f + %.1f MiB; anonymous above idle %.1f KiB per running job",
		float64(idle.rssAnon)/(1<<20), float64(idle.rssFile)/(1<<20), float64(after.rssAnon)/(1<<20), float64(after.rssFile)/(1<<20),
		float64(after.rssAnon-idle.rssAnon)/float64(jobs)/1024)
	for pid := range sandboxProcesses(d) {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		t.Logf("sandboxes run %s", exe)
		break
	}
	if n, private, ticks := sandboxCost(d); n > 0 {
		t.Logf("SCALE %d sandbox processes (outside berth): %.1f MiB private memory and %.0f ms CPU each on average; "+
			"berth used %.1f CPU seconds from the first submit to all running, plus %.1f in its children (the sandbox spawner)",
			n, float64(private)/float64(n)/(1<<20), float64(ticks)*1000/clockTicks/float64(n), float64(running.cpuTicks-idle.cpuTicks)/clockTicks,
			float64(spawnerTicks)/clockTicks)
	}
	if n, usage := sandboxCgroupCPU(d); n > 0 {
		t.Logf("SCALE %d sandbox cgroups: %.1f ms CPU each (cpu.stat usage_usec: boot, SSH sessions and every process the job ran, exact)",
			n, float64(usage.Microseconds())/1000/float64(n))
	}
	if s := os.Getenv("BERTH_SCALE_PAUSE"); s != "" {
		// Time to look at the running daemon (pprof, /proc) by hand.
		pause, _ := time.ParseDuration(s)
		t.Logf("pausing %s: berth pid %d listens on %s", pause, pid, d.listen)
		time.Sleep(pause)
	}
	// A graceful stop would wait for the hour-long jobs; the cleanup
	// deletes the sandboxes.
	d.kill9()
}

// submitAll submits n jobs over the API from 32 clients at once.
func submitAll(t *testing.T, c *api.Client, n int) {
	t.Helper()
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		errs = make(chan error, 32)
	)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				_, err := c.Submit(ctx, api.JobRequest{Script: "exec sleep " + scaleSleep})
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("submit: %v", err)
	}
}

// scaleSleep is the job's command line, told apart from every other
// process on the host so that the test can count running jobs exactly.
const scaleSleep = "7201"

// waitRunning waits until n job scripts run (counted as processes on the
// host: the API's "running" starts when berth takes a job, before its
// sandbox boots) and returns how long after start that was.
func waitRunning(t *testing.T, d *daemon, n int, start time.Time) time.Duration {
	t.Helper()
	deadline := start.Add(15 * time.Minute)
	last, checked := -1, time.Now()
	for {
		running := countSleeps()
		if running >= n {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d jobs running after %s", running, n, time.Since(start))
		}
		if time.Since(checked) > 5*time.Second {
			checked = time.Now()
			if failed := jobsIn(t, d, api.JobFailed); failed > 0 {
				t.Fatalf("%d jobs failed before all ran (they sleep two hours); see the berth log", failed)
			}
		}
		if running/100 != last/100 {
			t.Logf("%.1fs: %d running", time.Since(start).Seconds(), running)
			last = running
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// countSleeps counts the processes on the host running the job script.
func countSleeps() int {
	want := "sleep\x00" + scaleSleep + "\x00"
	procs, _ := os.ReadDir("/proc")
	n := 0
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		if b, err := os.ReadFile("/proc/" + p.Name() + "/cmdline"); err == nil && string(b) == want {
			n++
		}
	}
	return n
}

// jobsIn counts the jobs in a state through the API, page by page.
func jobsIn(t *testing.T, d *daemon, state api.JobState) int {
	c := d.client()
	jobs, err := c.AllJobs(context.Background(), state)
	if err != nil {
		t.Fatalf("list %s jobs: %v", state, err)
	}
	return len(jobs)
}

// procSample is what /proc says about one process.
type procSample struct {
	threads, fds int
	rss          int64 // bytes
	rssAnon      int64 // bytes of rss that are anonymous (heap, stacks)
	rssFile      int64 // bytes of rss mapped from files (berth's text and data)
	cpuTicks     int64 // utime+stime in clock ticks
}

func (s procSample) String() string {
	return fmt.Sprintf("%d threads, RSS %.1f MiB, %d fds", s.threads, float64(s.rss)/(1<<20), s.fds)
}

// childrenCPUTicks sums utime+stime of berth's live child processes (the
// sandbox spawner clones the sandboxes for berth, so its CPU is berth's
// side of a sandbox's birth; it is counted in berth's own figures only once
// reaped).
func childrenCPUTicks(ppid int) int64 {
	entries, _ := os.ReadDir("/proc")
	var sum int64
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 > len(stat) {
			continue
		}
		f := strings.Fields(string(stat[i+2:]))
		if len(f) < 13 || f[1] != strconv.Itoa(ppid) {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		sum += ut + st
	}
	return sum
}

// clockTicks is USER_HZ, 100 on every Linux that Go supports.
const clockTicks = 100

func sampleProc(t *testing.T, pid int) procSample {
	t.Helper()
	var s procSample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "Threads":
			s.threads = int(n)
		case "VmRSS":
			s.rss = n << 10
		case "RssAnon":
			s.rssAnon = n << 10
		case "RssFile":
			s.rssFile = n << 10
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	s.fds = len(fds)
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the whole line.
	rest := stat[bytes.LastIndexByte(stat, ')')+2:]
	f := strings.Fields(string(rest))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	s.cpuTicks = ut + st
	return s
}

// sandboxCgroupCPU sums cpu.stat usage_usec over the cgroups of the
// daemon's instances (none when berth has no cgroup tree, unprivileged).
// Unlike /proc/PID/stat, which rounds each process down to 10 ms ticks, it
// is exact and counts processes that are gone.
func sandboxCgroupCPU(d *daemon) (n int, usage time.Duration) {
	metas, _ := filepath.Glob(filepath.Join(d.dir, "state", "provider", "local", "local", "instances", "*", "meta.json"))
	for _, path := range metas {
		var m struct {
			Cgroup string `json:"cgroup"`
		}
		if b, err := os.ReadFile(path); err != nil || json.Unmarshal(b, &m) != nil || m.Cgroup == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(m.Cgroup, "cpu.stat"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, _ := strconv.ParseInt(v, 10, 64)
				usage += time.Duration(us) * time.Microsecond
				n++
			}
		}
	}
	return n, usage
}

// sandboxCost sums the private memory (RssAnon: the binary's text is
// shared between all of them) and the CPU time of the daemon's sandbox
// processes, including the shells and sleeps they reaped.
func sandboxCost(d *daemon) (n int, private int64, cpuTicks int64) {
	for pid := range sandboxProcesses(d) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
				kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				n++
				private += kb << 10
			}
		}
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
			for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
				v, _ := strconv.ParseInt(f[i], 10, 64)
				cpuTicks += v
			}
		}
	}
	return n, private, cpuTicks
}

// waitWarm waits until instances sandboxes are ready, then a few seconds
// more for the boots' own work (listings, disk walks) to settle, so that
// the ramp measured after it is the jobs' alone.
func waitWarm(t *testing.T, d *daemon, instances int) {
	t0 := time.Now()
	c := d.client()
	for {
		list, err := c.Instances(context.Background())
		ready := 0
		for _, in := range list {
			if in.ReadyAt != nil {
				ready++
			}
		}
		if err == nil && ready >= instances {
			t.Logf("WARM %d instances ready after %.1fs", ready, time.Since(t0).Seconds())
			break
		}
		if time.Since(t0) > 10*time.Minute {
			t.Fatalf("warm pool: %d of %d instances ready after 10m (last error: %v)", ready, instances, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(5 * time.Second)
}
