package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/berth-ci/berth/bench"
)

// benchJobLog collects each replayed job's wait for --jobs FILE, so that a
// reader can see which jobs waited (a p95 says how long, not which).
type benchJobLog struct {
	jobs    []bench.Job
	start   time.Time // the replay's start, from which the warm-up runs
	warmup  time.Duration
	waits   []float64 // seconds
	started []bool
}

func newBenchJobLog(jobs []bench.Job, start time.Time, warmup time.Duration) *benchJobLog {
	return &benchJobLog{jobs: jobs, start: start, warmup: warmup,
		waits: make([]float64, len(jobs)), started: make([]bool, len(jobs))}
}

// record is bench.Config.JobStarted.
func (l *benchJobLog) record(j int, wait time.Duration, _ bool) {
	l.waits[j], l.started[j] = wait.Seconds(), true
}

// write writes one CSV line per job in arrival order: its position in the
// replay (from 1), its arrival in Unix seconds and in UTC, its wait in
// seconds (empty for a job that failed before it got a slot) and whether
// it counts in the wait statistics ("measured") or arrived in the warm-up
// ("warmup"), as the replay decides. Written to a temporary file first, so
// a failed write leaves no half file.
func (l *benchJobLog) write(path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("--jobs: %w", err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "job,arrival_unix_s,arrival_utc,wait_s,counted")
	for j, job := range l.jobs {
		wait := ""
		if l.started[j] {
			wait = strconv.FormatFloat(l.waits[j], 'f', 3, 64)
		}
		counted := "measured"
		if job.Arrival.Sub(l.start) < l.warmup {
			counted = "warmup"
		}
		at := job.Arrival.UTC()
		fmt.Fprintf(w, "%d,%s,%s,%s,%s\n", j+1, strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', -1, 64),
			at.Format("2006-01-02T15:04:05.000Z"), wait, counted)
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("--jobs %s: %w", path, err)
	}
	return nil
}
