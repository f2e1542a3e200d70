package bench

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func unixJob(arrival int64, seconds int) Job {
	return Job{Arrival: time.Unix(arrival, 0).UTC(), Duration: time.Duration(seconds) * time.Second}
}

// The sample holds every row of ten real jobs of job_events, picked for
// how they end. Each expected row is worked out by hand from the sample:
// arrival = 2011-05-01 22:50 UTC + first SUBMIT, duration = last end − first
// SCHEDULE, both rounded to the second.
func TestGoogle2011JobEvents(t *testing.T) {
	f, err := os.Open("testdata/google2011_job_events_sample.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := &Google2011{}
	if err := g.Read(f, f.Name()); err != nil {
		t.Fatal(err)
	}
	jobs, st := g.Jobs(time.Time{}, time.Time{})
	want := []Job{
		unixJob(1304290804, 70),    // 6251639646: SUBMIT 604.046279 s, SCHEDULE 605.569012, FINISH 675.251710
		unixJob(1304290812, 49),    // 6251668759: FINISH after 48.58 s
		unixJob(1304290907, 1738),  // 6251671757: KILL
		unixJob(1304290970, 151),   // 6251675379: FAIL
		unixJob(1304324112, 348),   // 6253771429: FAIL, resubmitted, FINISH: first SUBMIT/SCHEDULE to last end
		unixJob(1304347753, 29406), // 6255429781: LOST
	}
	if !reflect.DeepEqual(jobs, want) {
		t.Fatalf("jobs:\n got %v\nwant %v", jobs, want)
	}
	wantSt := Google2011Stats{
		Rows: 30, Units: 10, InWindow: 8, Kept: 6,
		SubmittedBeforeTrace: 2, // 3418309 and 3418314, at timestamp 0
		NoEnd:                1, // 6253804059 never ends in the trace
		Short:                1, // 6251707374 ran 0.1 s
		EndTypes:             map[string]int{"FINISH": 3, "KILL": 1, "FAIL": 1, "LOST": 1},
	}
	if !reflect.DeepEqual(st, wantSt) {
		t.Fatalf("stats:\n got %+v\nwant %+v", st, wantSt)
	}

	// The window is on the exact submit time, before rounding: the first
	// job was submitted at 22:50:00 + 604.046 s.
	from := Google2011Epoch.Add(604046279 * time.Microsecond)
	jobs, st = g.Jobs(from, from.Add(time.Hour))
	if len(jobs) != 4 || st.InWindow != 5 || st.Short != 1 || !jobs[0].Arrival.Equal(want[0].Arrival) {
		t.Fatalf("one hour from the first submit: %v, %+v", jobs, st)
	}
	jobs, _ = g.Jobs(from.Add(time.Microsecond), time.Time{})
	if len(jobs) != 5 || jobs[0] != want[1] {
		t.Fatalf("a microsecond after the first submit: %v", jobs)
	}
}

// task_events: two real jobs of two tasks each. Per job, a job spans its
// tasks; per task, every task is a job of its own.
func TestGoogle2011TaskEvents(t *testing.T) {
	sample, err := os.ReadFile("testdata/google2011_task_events_sample.csv")
	if err != nil {
		t.Fatal(err)
	}
	g := &Google2011{}
	if err := g.Read(bytes.NewReader(sample), "sample"); err != nil {
		t.Fatal(err)
	}
	jobs, st := g.Jobs(time.Time{}, time.Time{})
	want := []Job{
		unixJob(1304290972, 150), // 6251675438: SCHEDULE 772.860605, last KILL 922.770415
		unixJob(1304291121, 403), // 6251693423: SCHEDULE 922.000512, last KILL 1324.868716
	}
	if !reflect.DeepEqual(jobs, want) || st.Units != 2 || st.Rows != 12 || st.EndTypes["KILL"] != 2 {
		t.Fatalf("per job: %v %+v", jobs, st)
	}

	g = &Google2011{PerTask: true}
	if err := g.Read(bytes.NewReader(sample), "sample"); err != nil {
		t.Fatal(err)
	}
	jobs, st = g.Jobs(time.Time{}, time.Time{})
	want = []Job{unixJob(1304290972, 150), unixJob(1304290972, 150), unixJob(1304291121, 403), unixJob(1304291121, 403)}
	if !reflect.DeepEqual(jobs, want) || st.Units != 4 || st.Kept != 4 {
		t.Fatalf("per task: %v %+v", jobs, st)
	}
}

func TestGoogle2011BadInput(t *testing.T) {
	for name, in := range map[string]string{
		"columns": "1,2,3\n",
		"numbers": "x,,3418309,0,user,3,name,logical\n",
	} {
		err := (&Google2011{}).Read(strings.NewReader(in), "part-00000")
		if err == nil || !strings.Contains(err.Error(), "part-00000:1:") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// The GitLab sample is two pages of GET /projects/:id/jobs, the second
// repeating a job of the first, with jobs that never ran, one still
// running and one from a GitLab without queued_duration.
func TestReadGitLabJobs(t *testing.T) {
	f, err := os.Open("testdata/gitlab_jobs_sample.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jobs, st, err := ReadGitLabJobs(f)
	if err != nil {
		t.Fatal(err)
	}
	at := func(h, m, s int) time.Time { return time.Date(2026, 3, 2, h, m, s, 0, time.UTC) }
	want := []Job{
		{Arrival: at(8, 58, 30), Duration: 60 * time.Second},  // 8990: created_at 09:58:30+01:00, no queued_duration
		{Arrival: at(10, 0, 0), Duration: 235 * time.Second},  // 9001: started 10:00:03 after 2.6 s queued
		{Arrival: at(10, 3, 58), Duration: 346 * time.Second}, // 9002: started 10:04:10.4 after 12.3 s; ran 345.5 s
	}
	if !reflect.DeepEqual(jobs, want) {
		t.Fatalf("jobs:\n got %v\nwant %v", jobs, want)
	}
	wantSt := GitLabStats{Read: 7, Kept: 3, Duplicates: 1, NotRun: 3, FromCreatedAt: 1}
	if st != wantSt {
		t.Fatalf("stats %+v, want %+v", st, wantSt)
	}

	// One job object per line works too.
	jobs, _, err = ReadGitLabJobs(strings.NewReader(`{"id":1,"created_at":"2026-01-01T00:00:00Z","started_at":"2026-01-01T00:00:10Z","finished_at":"2026-01-01T00:01:10Z","queued_duration":4}
{"id":2,"created_at":"2026-01-01T00:00:00Z","started_at":"2026-01-01T00:00:20Z","finished_at":"2026-01-01T00:00:50Z"}`))
	if err != nil || len(jobs) != 2 || jobs[0].Duration != 30*time.Second || jobs[1].Arrival != time.Date(2026, 1, 1, 0, 0, 6, 0, time.UTC) {
		t.Fatalf("lines: %v, %v", jobs, err)
	}
}

func TestReadGitLabJobsErrors(t *testing.T) {
	for name, c := range map[string]struct{ in, want string }{
		"error answer": {`{"message":"401 Unauthorized"}`, "error answer from GitLab"},
		"not json":     {`id,status`, "GitLab jobs JSON"},
		"empty":        {`[]`, "no jobs"},
		"wrong shape":  {`[{"id":"x"}]`, "array 1"},
	} {
		_, _, err := ReadGitLabJobs(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to say %q", name, err, c.want)
		}
	}
}

func TestWriteTraceReadsBack(t *testing.T) {
	jobs := []Job{unixJob(100, 5), {Arrival: time.Unix(160, 0).UTC(), Duration: 2500 * time.Millisecond}}
	var buf bytes.Buffer
	if err := WriteTrace(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != "arrival_unix_s,duration_s\n100,5\n160,2.5\n" {
		t.Fatalf("wrote %q", got)
	}
	back, err := ReadTrace(&buf)
	if err != nil || !reflect.DeepEqual(back, jobs) {
		t.Fatalf("read back %v, %v", back, err)
	}
}
