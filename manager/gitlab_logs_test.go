package manager

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

// Issue 42, item 7: `berth jobs gitlab-N` shows the job's own script, not
// the wrapper berth runs on the instance, and `berth logs gitlab-N` (what
// `berth jobs` tells one to run) prints the job's log, masked as GitLab
// has it; of a finished job berth keeps the last 32 KiB.
func TestGitLabJobScriptAndLog(t *testing.T) {
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	t.Cleanup(fake.Close)
	const secret = "s3cr3t-value-42"
	id := fake.AddJob(gitlabfake.JobSpec{
		Script:      []string{"echo the job says hello", `echo "secret is $SECRET"`, "i=0; while [ $i -lt 800 ]; do echo filler line $i of a long log to pass the kept tail; i=$((i+1)); done", "echo the-last-line"},
		AfterScript: []string{"echo tidying up"},
		Variables:   []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}, {Key: "SECRET", Value: secret, Masked: true}}})
	m := startManager(t, fmt.Sprintf(`
[[source]]
kind = "gitlab"
url = %q
token = "glrt-good"
check_interval = "100ms"
[autoscaler]
max_instances = 1
`, fake.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := fake.WaitAllDone(ctx); err != nil {
		t.Fatalf("the job did not finish: %v", err)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	tok, err := api.ReadTokenFile(api.TokenPath(m.cfg.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	c := api.NewClient(srv.URL)
	c.Token = tok
	apiID := "gitlab-" + strconv.FormatInt(id, 10)
	j, err := c.Job(ctx, apiID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(j.Script, "echo the job says hello\n") || j.AfterScript != "echo tidying up" {
		t.Errorf("berth jobs %s shows script %q, after_script %q; want the job's own", apiID, j.Script, j.AfterScript)
	}
	var log bytes.Buffer
	if err := c.Log(ctx, apiID, false, &log); err != nil {
		t.Fatalf("berth logs %s: %v", apiID, err)
	}
	out := log.String()
	for _, want := range []string{"[berth keeps the last 32 KiB", "the-last-line", "tidying up", "Job succeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("berth logs %s lacks %q:\n%s", apiID, want, out[max(0, len(out)-2000):])
		}
	}
	if n := len(out); n > 33<<10 {
		t.Errorf("log of %d bytes, want the 32 KiB tail and a notice", n)
	}
	if trace := fake.Job(id).Trace(); !strings.HasSuffix(trace, out[strings.Index(out, "]\n")+2:]) {
		t.Errorf("the tail berth shows is not the end of what GitLab has")
	}
	if strings.Contains(out, secret) {
		t.Error("the masked value is in berth's log")
	}
}

// liveLog is a GitLab job's log as it grows; it is complete once done.
type liveLog struct {
	mu   sync.Mutex
	b    []byte
	done bool
}

func (l *liveLog) UserScript() (string, string) { return "make test", "" }
func (l *liveLog) WebURL() string               { return "" }
func (l *liveLog) LogSince(o int) ([]byte, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b[min(o, len(l.b)):]...), l.done
}
func (l *liveLog) add(s string, done bool) {
	l.mu.Lock()
	l.b, l.done = append(l.b, s...), done
	l.mu.Unlock()
}

// liveJob is a GitLab job that is only its log.
type liveJob struct{ *liveLog }

func (liveJob) ID() string                               { return "9" }
func (liveJob) Spec() jobsource.Spec                     { return jobsource.Spec{Script: "the wrapper"} }
func (liveJob) Log() io.Writer                           { return io.Discard }
func (liveJob) Started(string)                           {}
func (liveJob) Canceled() <-chan jobsource.CancelRequest { return nil }
func (j liveJob) Finish(context.Context, jobsource.Result) error {
	j.add("Job succeeded\n", true)
	return nil
}

// `berth logs gitlab-N --follow` streams a running job's log until the job
// ends; its script is the job's own.
func TestGitLabLogFollowed(t *testing.T) {
	m := &Manager{}
	live := &liveLog{b: []byte("first line\n")}
	job := m.glJobs.track(liveJob{live}, time.Now())
	job.Started("i-1")
	if j, _ := m.glJobs.get("gitlab-9"); j.Script != "make test" {
		t.Errorf("script %q, want the job's own", j.Script)
	}
	h := m.withGitLabJobs(http.NotFoundHandler())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(api.WithPrincipal(r.Context(), api.Principal{Admin: true})))
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/jobs/gitlab-9/log?follow=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if l, err := br.ReadString('\n'); l != "first line\n" {
		t.Fatalf("first line %q, %v", l, err)
	}
	live.add("second line\n", false)
	if l, err := br.ReadString('\n'); l != "second line\n" {
		t.Fatalf("second line %q, %v", l, err)
	}
	if err := job.Finish(context.Background(), jobsource.Result{}); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "Job succeeded\n" {
		t.Errorf("rest of the stream %q, %v", rest, err)
	}
}
