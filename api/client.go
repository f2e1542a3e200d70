package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ResolveServer picks the server URL: flag when set, else $BERTH_SERVER,
// else DefaultServer. A bare host:port gets http:// so that
// BERTH_SERVER=127.0.0.1:9000 works as people expect.
func ResolveServer(flag string) string {
	s := strings.TrimSpace(flag)
	if s == "" {
		s = strings.TrimSpace(os.Getenv(ServerEnv))
	}
	if s == "" {
		s = DefaultServer
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	return strings.TrimRight(s, "/")
}

// Client talks to a berth server. The zero value is not usable; use
// NewClient. It is safe for concurrent use.
type Client struct {
	// BaseURL is the server's root, e.g. "http://127.0.0.1:8765".
	BaseURL string
	// HTTP does the requests. It must not have a Timeout, because Log with
	// follow streams for as long as the job runs; bound calls with ctx.
	HTTP *http.Client
	// Token is sent as "Authorization: Bearer TOKEN" (see ResolveToken);
	// empty sends none, and the server answers 401 saying how to get one.
	Token string
}

// NewClient returns a client for server, resolved with ResolveServer (so ""
// means $BERTH_SERVER or DefaultServer).
func NewClient(server string) *Client {
	return &Client{BaseURL: ResolveServer(server), HTTP: http.DefaultClient}
}

// Submit queues a job and returns it as the server stored it.
func (c *Client) Submit(ctx context.Context, req JobRequest) (Job, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Job{}, fmt.Errorf("encode job request: %w", err)
	}
	// One key for every try of this submit: a try that applied although
	// its answer was lost (a takeover) is answered with its job when the
	// call sends it again, rather than queued twice.
	var raw [16]byte
	rand.Read(raw[:])
	ctx = context.WithValue(ctx, idemKey{}, hex.EncodeToString(raw[:]))
	var j Job
	err = c.do(ctx, http.MethodPost, "/api/v1/jobs", body, &j)
	return j, err
}

// idemKey carries a submit's Idempotency-Key to sendOnce.
type idemKey struct{}

// Jobs lists the newest jobs (the server's default page, 100), oldest
// first.
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	list, err := c.JobPage(ctx, ListParams{})
	return list.Jobs, err
}

// JobPage lists one page of jobs: p.Limit of the newest (0 for the
// server's default, at most MaxListLimit) in p.State before p.Cursor,
// oldest first; its Next is the cursor of the page before it.
func (c *Client) JobPage(ctx context.Context, p ListParams) (JobList, error) {
	q := url.Values{}
	if p.State != "" {
		q.Set("state", string(p.State))
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	path := "/api/v1/jobs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, path, nil, &raw); err != nil {
		return JobList{}, err
	}
	var list JobList
	if err := decodeList(raw, &list.Jobs, &list); err != nil {
		return JobList{}, fmt.Errorf("decode job list from %s: %w", c.BaseURL, err)
	}
	return list, nil
}

// AllJobs lists every job in state ("" for all), oldest first, following
// the pages from the newest.
func (c *Client) AllJobs(ctx context.Context, state JobState) ([]Job, error) {
	var pages [][]Job
	p := ListParams{State: state, Limit: MaxListLimit}
	for {
		list, err := c.JobPage(ctx, p)
		if err != nil {
			return nil, err
		}
		pages = append(pages, list.Jobs)
		if list.Next == "" || list.Next == p.Cursor {
			break
		}
		p.Cursor = list.Next
	}
	var all []Job
	for i := len(pages) - 1; i >= 0; i-- {
		all = append(all, pages[i]...)
	}
	return all, nil
}

// Job returns one job. An unknown ID yields an *Error with Status 404.
func (c *Client) Job(ctx context.Context, id string) (Job, error) {
	var j Job
	err := c.do(ctx, http.MethodGet, "/api/v1/jobs/"+url.PathEscape(id), nil, &j)
	return j, err
}

// Cancel cancels a job: a queued job is canceled at once, a running one is
// told to stop and ends shortly after. It returns the job's state after the
// request.
func (c *Client) Cancel(ctx context.Context, id string) (Job, error) {
	var j Job
	err := c.do(ctx, http.MethodPost, "/api/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, &j)
	return j, err
}

// Log copies the job's log to w. With follow it keeps streaming until the job
// ends (or ctx is done), so a caller that then asks for the job sees its
// final state.
func (c *Client) Log(ctx context.Context, id string, follow bool, w io.Writer) error {
	path := "/api/v1/jobs/" + url.PathEscape(id) + "/log"
	if follow {
		path += "?follow=1"
	}
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("read log of job %s from %s: %w (the job may still be running; resume with `berth logs %s --follow`)", id, c.BaseURL, err, id)
	}
	return nil
}

// Instances lists the manager's instances.
func (c *Client) Instances(ctx context.Context) ([]Instance, error) {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/api/v1/instances", nil, &raw); err != nil {
		return nil, err
	}
	var list InstanceList
	if err := decodeList(raw, &list.Instances, &list); err != nil {
		return nil, fmt.Errorf("decode instance list from %s: %w", c.BaseURL, err)
	}
	return list.Instances, nil
}

// decodeList accepts either a bare array (into arr) or the wrapping object
// (into obj), so the client keeps working whichever form a server chose.
func decodeList(raw json.RawMessage, arr, obj any) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return json.Unmarshal(trimmed, arr)
	}
	return json.Unmarshal(trimmed, obj)
}

func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s%s: read response: %w", method, c.BaseURL, path, err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s%s: decode response: %w (is %s a berth server?)", method, c.BaseURL, path, err, c.BaseURL)
	}
	return nil
}

// MaxRetryWait bounds how long a call waits for a manager to lead: a
// standby answers 503 with Retry-After while no manager leads or the
// leader cannot be reached (docs/ha.md), for a request it did not pass on,
// so the call is sent again. It is longer than a failover takes with the
// default lease_ttl (10 s).
const MaxRetryWait = 30 * time.Second

// send performs a request and turns any non-2xx answer into *Error, so
// callers only ever see a successful response body. A 503 with
// Retry-After (a takeover under way) is retried for up to MaxRetryWait.
func (c *Client) send(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	deadline := time.Now().Add(MaxRetryWait)
	for {
		resp, err := c.sendOnce(ctx, method, path, body)
		wait, retry := retryAfter(resp)
		if !retry || time.Now().Add(wait).After(deadline) {
			return c.answer(method, path, resp, err)
		}
		resp.Body.Close()
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// retryAfter says whether resp asks to be sent again, and when.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || secs < 0 {
		return 0, false
	}
	// Never a busy loop on "0", never longer than a few seconds between tries.
	return min(max(time.Duration(secs)*time.Second, 100*time.Millisecond), 5*time.Second), true
}

// sendOnce sends the request once.
func (c *Client) sendOnce(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return nil, fmt.Errorf("build request for %s: %w (check --server or %s)", c.BaseURL, err, ServerEnv)
	}
	if method == http.MethodPost {
		// Also for a POST without a body: the server refuses any other
		// type, so that a web page cannot post to it (CSRF).
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	req.Header.Set("Accept", "application/json")
	if k, ok := ctx.Value(idemKey{}).(string); ok {
		req.Header.Set("Idempotency-Key", k)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("cannot reach berth at %s: is `berth run` running at %s? (choose another server with --server or %s): %w", c.BaseURL, c.BaseURL, ServerEnv, err)
		}
		return nil, fmt.Errorf("%s %s%s: %w", method, c.BaseURL, path, err)
	}
	return resp, nil
}

// answer turns a failed request or a non-2xx answer into an error that
// says what to do.
func (c *Client) answer(method, path string, resp *http.Response, err error) (*http.Response, error) {
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	apiErr := &Error{Status: resp.StatusCode}
	if json.Unmarshal(data, apiErr) != nil || apiErr.Message == "" {
		snippet := strings.TrimSpace(string(data))
		if len(snippet) > 200 {
			snippet = snippet[:200] + "..."
		}
		apiErr.Message = fmt.Sprintf("%s %s%s: server answered %d %s", method, c.BaseURL, path, resp.StatusCode, http.StatusText(resp.StatusCode))
		if snippet != "" {
			apiErr.Message += ": " + snippet
		}
	}
	return nil, apiErr
}
