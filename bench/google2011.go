package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"
)

// Google2011Epoch is the wall-clock moment of trace time 0 in Google's
// clusterdata-2011-2 trace. The trace begins at 19:00 EDT on Sunday 1 May
// 2011 (23:00 UTC), and Google's schema puts that moment at timestamp 600 s,
// so that events from before the trace can sit at 0.
var Google2011Epoch = time.Date(2011, 5, 1, 23, 0, 0, 0, time.UTC).Add(-600 * time.Second)

// Event types of the trace's job_events and task_events tables (schema
// v2.1). SCHEDULE starts a run; FAIL, FINISH, KILL and LOST end one. EVICT
// (2) and the UPDATE events (7, 8) neither start nor end a job.
const (
	g11Submit   = 0
	g11Schedule = 1
	g11Fail     = 3
	g11Finish   = 4
	g11Kill     = 5
	g11Lost     = 6
)

// g11EndNames names the end events, for the conversion's statistics.
var g11EndNames = map[int]string{g11Fail: "FAIL", g11Finish: "FINISH", g11Kill: "KILL", g11Lost: "LOST"}

// The two tables the converter reads, told apart by their column count:
// job_events has 8 columns with the event type in column 4; task_events
// has 13 with the task index in column 4 and the event type in column 6.
const (
	g11JobEventsColumns  = 8
	g11TaskEventsColumns = 13
)

// Google2011 turns the job_events or task_events table of Google's 2011
// cluster trace into a job trace. Each unit (a job, or with PerTask a task)
// arrives at its first SUBMIT and runs from its first SCHEDULE to its last
// end event (FINISH, FAIL, KILL or LOST): the time it held the cluster,
// including any resubmissions in between. Feed it every part file with Read,
// in any order, then call Jobs.
type Google2011 struct {
	// PerTask makes every task of task_events a unit of its own instead of
	// folding a job's tasks into one. It has no effect on job_events.
	PerTask bool

	units map[g11Key]*g11Unit
	rows  int
}

type g11Key struct{ job, task int64 }

// g11Unit holds trace timestamps in microseconds; 0 means "not seen".
type g11Unit struct {
	submit, schedule, end int64
	endType               int
}

// Google2011Stats says what a conversion kept and dropped, and why.
type Google2011Stats struct {
	// Rows is the number of event rows read.
	Rows int
	// Units is the number of jobs (or tasks) seen.
	Units int
	// InWindow counts units whose arrival falls in the window.
	InWindow int
	// Kept is the number of jobs in the returned trace.
	Kept int
	// SubmittedBeforeTrace counts units whose first SUBMIT is at timestamp
	// 0, i.e. before the trace began: their arrival is unknown.
	SubmittedBeforeTrace int
	// NoEnd counts units in the window that never started or never ended
	// within the trace.
	NoEnd int
	// Short counts units in the window that ran for less than a second.
	Short int
	// EndTypes counts the kept units by their last end event.
	EndTypes map[string]int
}

// Read adds the events of one part file (CSV, no header, as Google ships
// them after gunzip). name is used in error messages.
func (g *Google2011) Read(r io.Reader, name string) error {
	if g.units == nil {
		g.units = map[g11Key]*g11Unit{}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		f := bytes.Split(b, []byte{','})
		var typeCol int
		task := int64(-1)
		switch len(f) {
		case g11JobEventsColumns:
			typeCol = 3
		case g11TaskEventsColumns:
			typeCol = 5
			if g.PerTask {
				t, err := strconv.ParseInt(string(f[3]), 10, 64)
				if err != nil {
					return fmt.Errorf("%s:%d: task index %q is not a number", name, line, f[3])
				}
				task = t
			}
		default:
			return fmt.Errorf("%s:%d: %d columns; want %d (job_events) or %d (task_events) of Google's clusterdata-2011-2 trace",
				name, line, len(f), g11JobEventsColumns, g11TaskEventsColumns)
		}
		ts, err1 := strconv.ParseInt(string(f[0]), 10, 64)
		job, err2 := strconv.ParseInt(string(f[2]), 10, 64)
		typ, err3 := strconv.Atoi(string(f[typeCol]))
		if err1 != nil || err2 != nil || err3 != nil {
			return fmt.Errorf("%s:%d: want numbers in the timestamp, job ID and event type columns, got %q", name, line, b)
		}
		g.rows++
		g.add(g11Key{job, task}, ts, typ)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// g11AfterTrace is the timestamp of events that happened after the trace
// ended (2^63 − 1 in Google's schema); such an event is as good as unseen.
const g11AfterTrace = 1<<63 - 1

func (g *Google2011) add(k g11Key, ts int64, typ int) {
	u := g.units[k]
	if u == nil {
		u = &g11Unit{submit: -1}
		g.units[k] = u
	}
	if ts == g11AfterTrace {
		return
	}
	switch typ {
	case g11Submit:
		if u.submit < 0 || ts < u.submit {
			u.submit = ts
		}
	case g11Schedule:
		if u.schedule == 0 || ts < u.schedule {
			u.schedule = ts
		}
	case g11Fail, g11Finish, g11Kill, g11Lost:
		if ts >= u.end {
			u.end, u.endType = ts, typ
		}
	}
}

// Jobs returns the units that arrive in [from, to) as a trace sorted by
// arrival, with whole seconds as in the CSV. A zero from or to leaves that
// side open. Units that never ran to an end inside the trace, or ran for
// less than a second, are dropped and counted in the statistics.
func (g *Google2011) Jobs(from, to time.Time) ([]Job, Google2011Stats) {
	st := Google2011Stats{Rows: g.rows, Units: len(g.units), EndTypes: map[string]int{}}
	var jobs []Job
	for _, u := range g.units {
		if u.submit < 0 {
			continue // never submitted in the tables read: not a unit we can place
		}
		if u.submit == 0 {
			st.SubmittedBeforeTrace++
			continue
		}
		// The window takes the exact moment; the trace keeps whole seconds.
		exact := Google2011Epoch.Add(time.Duration(u.submit) * time.Microsecond)
		if (!from.IsZero() && exact.Before(from)) || (!to.IsZero() && !exact.Before(to)) {
			continue
		}
		st.InWindow++
		if u.schedule == 0 || u.end == 0 || u.end < u.schedule {
			st.NoEnd++
			continue
		}
		if u.end-u.schedule < 1e6 {
			st.Short++
			continue
		}
		st.EndTypes[g11EndNames[u.endType]]++
		jobs = append(jobs, Job{Arrival: Google2011Epoch.Add(g11Seconds(u.submit)), Duration: g11Seconds(u.end - u.schedule)})
	}
	sort.Slice(jobs, func(i, j int) bool {
		if !jobs[i].Arrival.Equal(jobs[j].Arrival) {
			return jobs[i].Arrival.Before(jobs[j].Arrival)
		}
		return jobs[i].Duration < jobs[j].Duration
	})
	st.Kept = len(jobs)
	return jobs, st
}

// g11Seconds rounds a span of trace microseconds to the nearest second.
func g11Seconds(us int64) time.Duration {
	return time.Duration((us+500_000)/1_000_000) * time.Second
}
