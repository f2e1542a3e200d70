package gitlabfake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"net/http"
	"testing"
	"time"
)

// call sends one API call to the fake and returns the answer.
func call(t *testing.T, f *Fake, method, path string, header map[string]string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, f.URL()+"/api/v4/"+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func jsonBody(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// The fake answers like GitLab across a job's life, including its refusals.
func TestProtocol(t *testing.T) {
	f := New(Options{LongPoll: 50 * time.Millisecond})
	defer f.Close()

	if r := call(t, f, "POST", "runners/verify", nil, jsonBody(map[string]string{"token": "bad"})); r.StatusCode != 403 {
		t.Errorf("verify with a bad token = %d", r.StatusCode)
	}
	r := call(t, f, "POST", "jobs/request", nil, jsonBody(map[string]string{"token": f.Token()}))
	lu := r.Header.Get("X-GitLab-Last-Update")
	if r.StatusCode != 204 || lu == "" {
		t.Fatalf("empty queue = %d, last update %q", r.StatusCode, lu)
	}
	// With the current last_update the poll is held, then answered 204.
	if r := call(t, f, "POST", "jobs/request", nil, jsonBody(map[string]string{"token": f.Token(), "last_update": lu})); r.StatusCode != 204 {
		t.Errorf("held poll = %d", r.StatusCode)
	}

	id := f.AddJob(JobSpec{Script: []string{"true"}})
	j := f.Job(id)
	f.FailNextRequests(409, 1)
	if r := call(t, f, "POST", "jobs/request", nil, jsonBody(map[string]string{"token": f.Token()})); r.StatusCode != 409 {
		t.Errorf("injected 409 = %d", r.StatusCode)
	}
	if r := call(t, f, "POST", "jobs/request", nil, jsonBody(map[string]string{"token": f.Token()})); r.StatusCode != 201 || j.State() != StateRunning {
		t.Fatalf("request with a job = %d, state %s", r.StatusCode, j.State())
	}

	tok := map[string]string{"JOB-TOKEN": j.Token()}
	patch := func(rng string, body string) *http.Response {
		h := map[string]string{"JOB-TOKEN": j.Token()}
		if rng != "" {
			h["Content-Range"] = rng
		}
		return call(t, f, "PATCH", fmt.Sprintf("jobs/%d/trace", id), h, []byte(body))
	}
	if r := patch("", "x"); r.StatusCode != 400 {
		t.Errorf("patch without Content-Range = %d", r.StatusCode)
	}
	if r := patch("0-4", "hello"); r.StatusCode != 202 || r.Header.Get("Range") != "0-5" || r.Header.Get("Job-Status") != "running" {
		t.Errorf("patch = %d Range %q Job-Status %q", r.StatusCode, r.Header.Get("Range"), r.Header.Get("Job-Status"))
	}
	if r := patch("3-5", "abc"); r.StatusCode != 416 || r.Header.Get("Range") != "0-5" {
		t.Errorf("patch at a wrong offset = %d Range %q", r.StatusCode, r.Header.Get("Range"))
	}
	if r := patch("0-4", "hello"); r.StatusCode != 416 {
		t.Errorf("patch resending stored bytes = %d", r.StatusCode)
	}
	update := func(state, checksum string) *http.Response {
		return call(t, f, "PUT", fmt.Sprintf("jobs/%d", id), tok, jsonBody(map[string]any{
			"token": j.Token(), "state": state, "failure_reason": "script_failure", "exit_code": 2,
			"output": map[string]any{"checksum": checksum, "bytesize": 5}}))
	}
	good := fmt.Sprintf("crc32:%08x", crc32.ChecksumIEEE([]byte("hello")))
	if r := update("failed", "crc32:00000000"); r.StatusCode != 412 || j.Trace() != "" {
		t.Errorf("update with a wrong checksum = %d, trace %q (want 412 and the trace reset)", r.StatusCode, j.Trace())
	}
	if r := patch("0-4", "hello"); r.StatusCode != 202 {
		t.Errorf("resend after 412 = %d", r.StatusCode)
	}
	if r := update("failed", good); r.StatusCode != 202 {
		t.Errorf("first final update = %d, want 202", r.StatusCode)
	}
	if r := update("failed", good); r.StatusCode != 200 || j.State() != StateFailed || j.ExitCode() != 2 || j.FailureReason() != "script_failure" {
		t.Errorf("second final update = %d, job %s %d %q", r.StatusCode, j.State(), j.ExitCode(), j.FailureReason())
	}
	if r := patch("5-5", "x"); r.StatusCode != 403 {
		t.Errorf("patch after the end = %d, want 403", r.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.WaitAllDone(ctx); err != nil {
		t.Error(err)
	}
}

func TestCancelAndCanceling(t *testing.T) {
	f := New(Options{})
	defer f.Close()
	a, b := f.Job(f.AddJob(JobSpec{})), f.Job(f.AddJob(JobSpec{}))
	for range 2 {
		call(t, f, "POST", "jobs/request", nil, jsonBody(map[string]string{"token": f.Token()}))
	}
	a.Cancel()
	r := call(t, f, "PATCH", fmt.Sprintf("jobs/%d/trace", a.ID()), map[string]string{"JOB-TOKEN": a.Token(), "Content-Range": "0-0"}, []byte("x"))
	if r.StatusCode != 403 || r.Header.Get("Job-Status") != StateCanceled {
		t.Errorf("patch of a canceled job = %d %q", r.StatusCode, r.Header.Get("Job-Status"))
	}
	b.Canceling()
	r = call(t, f, "PUT", fmt.Sprintf("jobs/%d", b.ID()), nil, jsonBody(map[string]any{"token": b.Token(), "state": "running"}))
	if r.StatusCode != 200 || r.Header.Get("Job-Status") != StateCanceling {
		t.Errorf("keep-alive of a canceling job = %d %q", r.StatusCode, r.Header.Get("Job-Status"))
	}
	r = call(t, f, "PUT", fmt.Sprintf("jobs/%d", b.ID()), nil, jsonBody(map[string]any{"token": b.Token(), "state": "failed",
		"failure_reason": "not_a_reason", "output": map[string]any{"checksum": "crc32:00000000", "bytesize": 0}}))
	if r.StatusCode != 400 {
		t.Errorf("unknown failure_reason = %d, want 400", r.StatusCode)
	}
}
