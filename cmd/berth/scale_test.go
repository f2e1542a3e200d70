package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
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
// README.md, "Scale"). BERTH_SCALE_THROTTLE sets scale_throttle's limit and
// burst (default 1000 instances per second, so that the throttle is not
// what is measured).
func TestScale(t *testing.T) {
	spec := os.Getenv("BERTH_SCALE")
	if spec == "" {
		t.Skip("set BERTH_SCALE=JOBS[/INSTANCES],... to measure berth with that many running jobs (minutes, gigabytes)")
	}
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
	d := newDaemon(t, fmt.Sprintf(`job_timeout = "1h"
[autoscaler]
max_instances = %d
capacity_per_instance = %d
instance_acquire_timeout = "10m"
[autoscaler.scale_throttle]
limit = %d
burst = %d
[[autoscaler.policy]]
idle_count = 0
idle_time = "1m"
`, instances, capacity, throttle, throttle))
	pid := d.cmd.Process.Pid
	idle := sampleProc(t, pid)
	t.Logf("idle berth: %s", idle)

	c := d.client()
	c.HTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	start := time.Now()
	submitAll(t, c, jobs)
	submitted := time.Since(start)
	allRunning := waitRunning(t, c, jobs, start)
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
				_, err := c.Submit(ctx, api.JobRequest{Script: "exec sleep 3600"})
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

// waitRunning polls the job list until n jobs run and returns how long
// after start that was.
func waitRunning(t *testing.T, c *api.Client, n int, start time.Time) time.Duration {
	t.Helper()
	deadline := start.Add(15 * time.Minute)
	last := -1
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		list, err := c.Jobs(ctx)
		cancel()
		if err != nil {
			t.Fatalf("list jobs: %v", err)
		}
		running, ended := 0, 0
		for _, j := range list {
			switch j.State {
			case api.JobRunning:
				running++
			case api.JobQueued:
			default:
				ended++
			}
		}
		if running == n {
			return time.Since(start)
		}
		if ended > 0 {
			t.Fatalf("%d jobs ended before all ran (they sleep an hour); see the berth log", ended)
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d jobs running after %s", running, n, time.Since(start))
		}
		if running/100 != last/100 {
			t.Logf("%.1fs: %d running", time.Since(start).Seconds(), running)
			last = running
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// procSample is what /proc says about one process.
type procSample struct {
	threads, fds int
	rss          int64 // bytes
	cpuTicks     int64 // utime+stime in clock ticks
}

func (s procSample) String() string {
	return fmt.Sprintf("%d threads, RSS %.1f MiB, %d fds", s.threads, float64(s.rss)/(1<<20), s.fds)
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
