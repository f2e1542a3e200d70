package queue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/jobsource/queue"
)

func serve(t testing.TB, q *queue.Queue) (*httptest.Server, *api.Client) {
	t.Helper()
	srv := httptest.NewServer(q.Handler())
	t.Cleanup(srv.Close)
	return srv, api.NewClient(srv.URL)
}

func submit(t *testing.T, c *api.Client, req api.JobRequest) api.Job {
	t.Helper()
	j, err := c.Submit(context.Background(), req)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return j
}

func request(t *testing.T, q *queue.Queue) *queue.Job {
	t.Helper()
	j, err := q.Request(context.Background())
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	if j == nil {
		t.Fatal("Request returned no job, want one")
	}
	return j.(*queue.Job)
}

func TestJobLifecycleOverHTTP(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		_, c := serve(t, q)
		ctx := context.Background()

		sub := submit(t, c, api.JobRequest{
			Script:  "make test",
			Env:     map[string]string{"B": "2", "A": "secret"},
			Timeout: "10m",
			Suspend: true,
		})
		if sub.ID == "" || sub.State != api.JobQueued || sub.Timeout != "10m0s" {
			t.Fatalf("submitted job = %+v", sub)
		}
		if strings.Join(sub.EnvNames, ",") != "A,B" {
			t.Errorf("EnvNames = %v, want [A B]", sub.EnvNames)
		}
		raw, err := json.Marshal(sub)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte("secret")) {
			t.Errorf("the API echoed an env value: %s", raw)
		}

		j := request(t, q)
		if j.ID() != sub.ID {
			t.Fatalf("Request gave job %s, want %s", j.ID(), sub.ID)
		}
		spec := j.Spec()
		if spec.Script != "make test" || strings.Join(spec.Env, " ") != "A=secret B=2" || spec.Timeout.String() != "10m0s" || !spec.Suspend {
			t.Errorf("Spec = %+v", spec)
		}
		if j.QueueWait() < 0 || !j.CreatedAt().Equal(sub.CreatedAt) {
			t.Errorf("CreatedAt = %v (submitted %v), QueueWait = %v", j.CreatedAt(), sub.CreatedAt, j.QueueWait())
		}
		j.Started("inst-1")
		got, err := c.Job(ctx, sub.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != api.JobRunning || got.Instance != "inst-1" || got.StartedAt == nil {
			t.Errorf("running job = %+v", got)
		}

		fmt.Fprintln(j.Log(), "line one")
		fmt.Fprintln(j.Log(), "line two")
		if err := j.Finish(ctx, jobsource.Result{ExitCode: 3, Failure: jobsource.FailureScript, Message: "the script exited with code 3", EnvKey: "env-42", Instance: "inst-1"}); err != nil {
			t.Fatalf("Finish: %v", err)
		}
		got, err = c.Job(ctx, sub.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != api.JobFailed || got.ExitCode == nil || *got.ExitCode != 3 || got.Failure != "script_failure" ||
			got.EnvKey != "env-42" || got.FinishedAt == nil || got.Reason != "the script exited with code 3" {
			t.Errorf("finished job = %+v", got)
		}
		var log bytes.Buffer
		if err := c.Log(ctx, sub.ID, false, &log); err != nil {
			t.Fatal(err)
		}
		if log.String() != "line one\nline two\n" {
			t.Errorf("log = %q", log.String())
		}
		if err := j.Finish(ctx, jobsource.Result{}); !errors.Is(err, queue.ErrFinished) {
			t.Errorf("second Finish = %v, want ErrFinished", err)
		}
		list, err := c.Jobs(ctx)
		if err != nil || len(list) != 1 || list[0].ID != sub.ID {
			t.Errorf("Jobs = %v, %v", list, err)
		}
	})
}

func TestResultStates(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		cases := []struct {
			res      jobsource.Result
			state    api.JobState
			exitCode *int
		}{
			{jobsource.Result{ExitCode: 0}, api.JobSuccess, ptr(0)},
			{jobsource.Result{ExitCode: -1, Failure: jobsource.FailureSystem, Message: "instance i: connection lost"}, api.JobFailed, nil},
			{jobsource.Result{ExitCode: -1, Failure: jobsource.FailureTimeout, Message: "timed out"}, api.JobFailed, nil},
			{jobsource.Result{ExitCode: -1, Failure: jobsource.FailureCanceled}, api.JobCanceled, nil},
			{jobsource.Result{ExitCode: 2}, api.JobFailed, ptr(2)}, // contradicting result reads as failure
		}
		q := openQueue(t, t.TempDir())
		for _, tc := range cases {
			sub, err := q.Submit(api.JobRequest{Script: "true"})
			if err != nil {
				t.Fatal(err)
			}
			j := request(t, q)
			if err := j.Finish(context.Background(), tc.res); err != nil {
				t.Fatal(err)
			}
			got, err := q.Get(sub.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tc.state || (got.ExitCode == nil) != (tc.exitCode == nil) || (got.ExitCode != nil && *got.ExitCode != *tc.exitCode) {
				t.Errorf("%+v → state %s exit %v, want %s %v", tc.res, got.State, got.ExitCode, tc.state, tc.exitCode)
			}
		}
	})
}

func ptr(i int) *int { return &i }

func TestFIFO(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		var ids []string
		for i := range 5 {
			j, err := q.Submit(api.JobRequest{Script: fmt.Sprintf("echo %d", i)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		for i, want := range ids {
			j := request(t, q)
			if j.ID() != want || j.Spec().Script != fmt.Sprintf("echo %d", i) {
				t.Errorf("Request #%d = %s %q, want %s", i, j.ID(), j.Spec().Script, want)
			}
		}
		j, err := q.Request(context.Background())
		if err != nil || j != nil {
			t.Errorf("Request on an empty queue = %v, %v; want nil, nil", j, err)
		}
	})
}

func TestRestartFailsRunningJobsAndKeepsQueued(t *testing.T) {
	dir := t.TempDir()
	q, err := queue.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 4 {
		j, err := q.Submit(api.JobRequest{Script: fmt.Sprintf("echo %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	taken := request(t, q)
	taken.Started("inst-7")
	fmt.Fprintln(taken.Log(), "partial output")
	// berth dies: the job is never finished.
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}

	q2 := openQueue(t, dir)
	interrupted := q2.Interrupted()
	if len(interrupted) != 1 || interrupted[0].ID != taken.ID() {
		t.Fatalf("Interrupted = %+v, want job %s", interrupted, taken.ID())
	}
	got, err := q2.Get(taken.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got.State != api.JobFailed || got.Reason != "berth restarted while the job ran" || got.Failure != "system_failure" || got.Instance != "inst-7" {
		t.Errorf("interrupted job = %+v", got)
	}
	_, c := serve(t, q2)
	var log bytes.Buffer
	if err := c.Log(context.Background(), taken.ID(), false, &log); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(log.String(), "partial output\n") || !strings.Contains(log.String(), queue.RestartReason) {
		t.Errorf("log after restart = %q", log.String())
	}
	for _, want := range ids[1:] {
		j := request(t, q2)
		if j.ID() != want {
			t.Errorf("after restart Request = %s, want %s", j.ID(), want)
		}
		if err := j.Finish(context.Background(), jobsource.Result{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q2.Close(); err != nil {
		t.Fatal(err)
	}
	// A clean shutdown leaves nothing to recover.
	q3 := openQueue(t, dir)
	if n := len(q3.Interrupted()); n != 0 {
		t.Errorf("Interrupted after a clean run = %d jobs, want 0", n)
	}
}

func TestCancel(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		_, c := serve(t, q)
		ctx := context.Background()

		queued := submit(t, c, api.JobRequest{Script: "sleep 1"})
		running := submit(t, c, api.JobRequest{Script: "sleep 2"})
		got, err := c.Cancel(ctx, queued.ID)
		if err != nil || got.State != api.JobCanceled || got.FinishedAt == nil {
			t.Fatalf("cancel queued = %+v, %v", got, err)
		}
		j := request(t, q)
		if j.ID() != running.ID {
			t.Fatalf("Request = %s, want %s (the canceled job must not run)", j.ID(), running.ID)
		}
		select {
		case <-j.Canceled():
			t.Fatal("Canceled closed before any cancel")
		default:
		}
		// The manager watches a running job through AfterCancel, not a
		// goroutine on Canceled.
		called := make(chan jobsource.CancelRequest, 1)
		j.AfterCancel(func(r jobsource.CancelRequest) { called <- r })
		stop := j.AfterCancel(func(jobsource.CancelRequest) { t.Error("a stopped AfterCancel function ran") })
		if !stop() {
			t.Error("stopping an AfterCancel function before the cancel reported false")
		}
		got, err = c.Cancel(ctx, running.ID)
		if err != nil || got.State != api.JobRunning || !got.CancelRequested {
			t.Fatalf("cancel running = %+v, %v", got, err)
		}
		if req := <-j.Canceled(); req.Graceful {
			t.Errorf("cancel request = %+v, want a forceful cancel", req)
		}
		select {
		case req := <-called:
			if req.Graceful {
				t.Errorf("AfterCancel got %+v, want a forceful cancel", req)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the AfterCancel function never ran after the cancel")
		}
		if _, err := c.Cancel(ctx, running.ID); err != nil {
			t.Errorf("second cancel of a running job: %v", err)
		}
		if err := j.Finish(ctx, jobsource.Result{ExitCode: -1, Failure: jobsource.FailureCanceled, Message: "canceled"}); err != nil {
			t.Fatal(err)
		}
		_, err = c.Cancel(ctx, running.ID)
		var apiErr *api.Error
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
			t.Errorf("cancel finished job: %v, want 409", err)
		}
		_, err = c.Cancel(ctx, "999")
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || !strings.Contains(apiErr.Message, "berth jobs") {
			t.Errorf("cancel unknown job: %v, want 404 saying how to list jobs", err)
		}
	})
}

func TestWaitForJobs(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := q.WaitForJobs(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("WaitForJobs on an empty queue with a done ctx = %v", err)
		}

		done := make(chan error, 1)
		go func() { done <- q.WaitForJobs(context.Background()) }()
		if _, err := q.Submit(api.JobRequest{Script: "true"}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("WaitForJobs = %v", err)
		}
		// Still pending: returns at once.
		if err := q.WaitForJobs(context.Background()); err != nil {
			t.Fatal(err)
		}
		request(t, q)

		go func() { done <- q.WaitForJobs(context.Background()) }()
		q.Close()
		if err := <-done; !errors.Is(err, queue.ErrClosed) {
			t.Errorf("WaitForJobs after Close = %v, want ErrClosed", err)
		}
	})
}

func TestLogFollow(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		_, c := serve(t, q)
		ctx := context.Background()
		sub := submit(t, c, api.JobRequest{Script: "true"})

		// Follow starts while the job is still queued.
		pr, pw := io.Pipe()
		followErr := make(chan error, 1)
		go func() {
			err := c.Log(ctx, sub.ID, true, pw)
			pw.CloseWithError(err)
			followErr <- err
		}()
		j := request(t, q)
		fmt.Fprint(j.Log(), "first\n")
		// Reading "first" back proves the stream delivers output while the
		// job is still running.
		buf := make([]byte, len("first\n"))
		if _, err := io.ReadFull(pr, buf); err != nil || string(buf) != "first\n" {
			t.Fatalf("first streamed bytes = %q, %v", buf, err)
		}
		fmt.Fprint(j.Log(), "second\n")
		if err := j.Finish(ctx, jobsource.Result{}); err != nil {
			t.Fatal(err)
		}
		rest, err := io.ReadAll(pr)
		if err != nil {
			t.Fatal(err)
		}
		if string(rest) != "second\n" {
			t.Errorf("rest of the stream = %q", rest)
		}
		if err := <-followErr; err != nil {
			t.Errorf("Log(follow) = %v", err)
		}
	})
}

func TestLogLimit(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir(), queue.WithMaxLogBytes(10))
		_, c := serve(t, q)
		sub := submit(t, c, api.JobRequest{Script: "yes"})
		j := request(t, q)
		for range 5 {
			if n, err := j.Log().Write([]byte("0123456789")); n != 10 || err != nil {
				t.Fatalf("Write = %d, %v; the log must absorb output", n, err)
			}
		}
		if err := j.Finish(context.Background(), jobsource.Result{}); err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		if err := c.Log(context.Background(), sub.ID, false, &log); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(log.String(), "0123456789\n[berth] the log reached its limit") || strings.Count(log.String(), "0123") != 1 {
			t.Errorf("log = %q", log.String())
		}
	})
}

func TestBadRequests(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		srv, _ := serve(t, q)
		big := `{"script": "` + strings.Repeat("x", api.MaxRequestBytes) + `"}`
		cases := []struct {
			name, body string
			status     int
			want       string
		}{
			{"unknown field", `{"scirpt": "make"}`, 400, `unknown field "scirpt"`},
			{"empty script", `{"script": "  \n"}`, 400, `"script" is empty`},
			{"missing script", `{"timeout": "1m"}`, 400, `"script" is empty`},
			{"bad timeout", `{"script": "x", "timeout": "10 minutes"}`, 400, "use a Go duration"},
			{"number timeout", `{"script": "x", "timeout": 600}`, 400, `field "timeout" must be a string`},
			{"negative timeout", `{"script": "x", "timeout": "-5m"}`, 400, "must be positive"},
			{"absurd timeout", `{"script": "x", "timeout": "10000h"}`, 400, "longer than the maximum"},
			{"bad env name", `{"script": "x", "env": {"1X": "y"}}`, 400, "not a shell identifier"},
			{"env as list", `{"script": "x", "env": ["A=1"]}`, 400, `field "env" must be an object`},
			{"not json", `script=make`, 400, "not valid JSON"},
			{"array", `[{"script": "x"}]`, 400, "must be a JSON object"},
			{"empty body", ``, 400, "the body is empty"},
			{"trailing data", `{"script": "x"} {"script": "y"}`, 400, "exactly one object"},
			{"truncated", `{"script": "x"`, 400, "ends in the middle"},
			{"too large", big, 413, "larger than"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp, err := http.Post(srv.URL+"/api/v1/jobs", "application/json", strings.NewReader(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var e api.Error
				if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
					t.Fatalf("error body is not JSON: %v", err)
				}
				if resp.StatusCode != tc.status || !strings.Contains(e.Message, tc.want) {
					t.Errorf("got %d %q, want %d containing %q", resp.StatusCode, e.Message, tc.status, tc.want)
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type = %q", ct)
				}
			})
		}
		jobs, err := q.List("", 0)
		if err != nil || len(jobs) != 0 {
			t.Errorf("after bad requests the queue holds %d jobs (%v), want 0", len(jobs), err)
		}
	})
}

func TestJSONErrorsForWrongMethodAndPath(t *testing.T) {
	q := openQueue(t, t.TempDir())
	srv, _ := serve(t, q)
	cases := []struct {
		method, path string
		status       int
	}{
		{http.MethodDelete, "/api/v1/jobs", 405},
		{http.MethodPut, "/api/v1/jobs/1", 405},
		{http.MethodGet, "/api/v1/jobs/1/cancel", 405},
		{http.MethodGet, "/api/v1/jobs/1", 404},
		{http.MethodGet, "/api/v1/jobs/abc", 404},
		{http.MethodGet, "/api/v1/jobs/1/nope", 404},
		{http.MethodGet, "/api/v1/jobs/1/log", 404},
		{http.MethodGet, "/api/v1/jobs?state=bogus", 400},
		{http.MethodGet, "/api/v1/jobs?limit=-1", 400},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e api.Error
		decErr := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != tc.status || decErr != nil || e.Message == "" {
			t.Errorf("%s %s = %d (%v, %q), want %d with a JSON error", tc.method, tc.path, resp.StatusCode, decErr, e.Message, tc.status)
		}
	}
}

func TestListFilterAndLimit(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		q := openQueue(t, t.TempDir())
		srv, _ := serve(t, q)
		for i := range 5 {
			if _, err := q.Submit(api.JobRequest{Script: fmt.Sprint(i)}); err != nil {
				t.Fatal(err)
			}
		}
		request(t, q) // job 1 runs
		get := func(query string) []string {
			resp, err := http.Get(srv.URL + "/api/v1/jobs" + query)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var list api.JobList
			if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, j := range list.Jobs {
				ids = append(ids, j.ID)
			}
			return ids
		}
		if got := strings.Join(get("?limit=2"), ","); got != "4,5" {
			t.Errorf("limit=2 → %s, want the newest two, oldest first: 4,5", got)
		}
		if got := strings.Join(get("?state=running"), ","); got != "1" {
			t.Errorf("state=running → %s, want 1", got)
		}
		if got := strings.Join(get(""), ","); got != "1,2,3,4,5" {
			t.Errorf("all → %s", got)
		}
	})
}

func TestSubmitWhenDiskIsFull(t *testing.T) {
	// bbolt's MaxSize makes the database refuse to grow exactly as a full
	// disk would, without filling the test machine's disk.
	q := openQueue(t, t.TempDir(), queue.WithMaxDBSize(256<<10))
	srv, c := serve(t, q)
	script := strings.Repeat("echo fill the database\n", 2000) // ~46 KB
	accepted := 0
	var full *http.Response
	for range 100 {
		body, _ := json.Marshal(api.JobRequest{Script: script})
		resp, err := http.Post(srv.URL+"/api/v1/jobs", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusCreated {
			resp.Body.Close()
			accepted++
			continue
		}
		full = resp
		break
	}
	t.Logf("%d jobs accepted before the database was full", accepted)
	if accepted == 0 {
		t.Fatal("not even one job fit; the test proves nothing")
	}
	if full == nil {
		t.Fatal("the database never reported full")
	}
	defer full.Body.Close()
	var e api.Error
	if err := json.NewDecoder(full.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if full.StatusCode != http.StatusInsufficientStorage || !strings.Contains(e.Message, "free disk space") {
		t.Errorf("full database → %d %q, want 507 saying to free disk space", full.StatusCode, e.Message)
	}
	// Nothing half-created: exactly the accepted jobs exist, all queued, and
	// the queue still works.
	jobs, err := c.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != accepted {
		t.Errorf("%d jobs listed, %d accepted", len(jobs), accepted)
	}
	for i := 0; i < accepted; i++ {
		j := request(t, q)
		if j.Spec().Script != script {
			t.Fatalf("job %s has a damaged script", j.ID())
		}
	}
	if j, err := q.Request(context.Background()); j != nil || err != nil {
		t.Errorf("after draining: %v, %v", j, err)
	}
}

func TestSecondOpenIsRefused(t *testing.T) {
	dir := t.TempDir()
	openQueue(t, dir)
	_, err := queue.Open(dir)
	if err == nil || !strings.Contains(err.Error(), "another `berth run`") {
		t.Fatalf("second Open = %v, want a lock error naming the likely cause", err)
	}
}

func TestClientConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := api.NewClient(url).Jobs(context.Background())
	if err == nil || !strings.Contains(err.Error(), "is `berth run` running at "+url) {
		t.Fatalf("err = %v", err)
	}
}
