package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"time"
)

// Job is one job of a trace: when it arrives and how long it runs once it
// has a slot.
type Job struct {
	Arrival  time.Time
	Duration time.Duration
}

// ReadTrace parses a trace in bench's CSV shape (docs/bench.md): an optional header
// line "arrival_unix_s,duration_s", then one job per line as integer (or
// decimal) seconds. Jobs are returned sorted by arrival; the sort is
// stable, so jobs arriving in the same second keep their order in the file.
func ReadTrace(r io.Reader) ([]Job, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	var jobs []Job
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 || b[0] == '#' {
			continue
		}
		a, d, ok := bytes.Cut(b, []byte{','})
		if !ok {
			return nil, fmt.Errorf("trace line %d: want \"arrival_unix_s,duration_s\", got %q", line, b)
		}
		arr, err1 := parseSeconds(a)
		dur, err2 := parseSeconds(bytes.TrimSpace(d))
		if err1 != nil || err2 != nil {
			if line == 1 && len(jobs) == 0 {
				continue // the header
			}
			return nil, fmt.Errorf("trace line %d: want two numbers of seconds, got %q", line, b)
		}
		if dur < 0 {
			return nil, fmt.Errorf("trace line %d: negative duration %v", line, dur)
		}
		jobs = append(jobs, Job{Arrival: time.Unix(0, 0).UTC().Add(arr), Duration: dur})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read trace: %w", err)
	}
	if len(jobs) == 0 {
		return nil, errors.New("trace has no jobs")
	}
	sort.SliceStable(jobs, func(i, j int) bool { return jobs[i].Arrival.Before(jobs[j].Arrival) })
	return jobs, nil
}

func parseSeconds(b []byte) (time.Duration, error) {
	s := string(bytes.TrimSpace(b))
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	return time.Duration(f * float64(time.Second)), nil
}

// WriteTrace writes jobs in the CSV shape ReadTrace reads: the header
// "arrival_unix_s,duration_s", then one job per line in whole seconds (a
// duration under a second is written with its fraction).
func WriteTrace(w io.Writer, jobs []Job) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("arrival_unix_s,duration_s\n")
	for _, j := range jobs {
		bw.WriteString(strconv.FormatInt(j.Arrival.Unix(), 10))
		bw.WriteByte(',')
		if j.Duration%time.Second == 0 {
			bw.WriteString(strconv.FormatInt(int64(j.Duration/time.Second), 10))
		} else {
			bw.WriteString(strconv.FormatFloat(j.Duration.Seconds(), 'f', -1, 64))
		}
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// LoadTrace reads a trace file; see ReadTrace.
func LoadTrace(path string) ([]Job, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open trace: %w (docs/bench.md says how to get public traces or convert your own CI history with berth bench convert)", err)
	}
	defer f.Close()
	jobs, err := ReadTrace(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return jobs, nil
}

// Window returns the jobs arriving in [first arrival + from, + hours). A
// zero hours means to the end of the trace. It also returns the start of
// the window, which is where a replay's clock starts: a window that begins
// in a quiet stretch starts with the fleet as the policy leaves it idle.
func Window(jobs []Job, from time.Duration, hours float64) ([]Job, time.Time) {
	if len(jobs) == 0 {
		return nil, time.Time{}
	}
	start := jobs[0].Arrival.Add(from)
	i := sort.Search(len(jobs), func(i int) bool { return !jobs[i].Arrival.Before(start) })
	j := len(jobs)
	if hours > 0 {
		end := start.Add(time.Duration(hours * float64(time.Hour)))
		j = i + sort.Search(len(jobs)-i, func(k int) bool { return !jobs[i+k].Arrival.Before(end) })
	}
	return jobs[i:j], start
}

// CapDurations returns a copy of jobs with every duration at most max (no
// cap when max is 0). Batch traces have multi-day jobs that say nothing
// about CI scaling; capping keeps their arrivals without their tails.
func CapDurations(jobs []Job, max time.Duration) []Job {
	out := make([]Job, len(jobs))
	copy(out, jobs)
	if max > 0 {
		for i := range out {
			if out[i].Duration > max {
				out[i].Duration = max
			}
		}
	}
	return out
}
