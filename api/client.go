package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
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
	var j Job
	err = c.do(ctx, http.MethodPost, "/api/v1/jobs", bytes.NewReader(body), &j)
	return j, err
}

// Jobs lists jobs, oldest first.
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/api/v1/jobs", nil, &raw); err != nil {
		return nil, err
	}
	var list JobList
	if err := decodeList(raw, &list.Jobs, &list); err != nil {
		return nil, fmt.Errorf("decode job list from %s: %w", c.BaseURL, err)
	}
	return list.Jobs, nil
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

func (c *Client) do(ctx context.Context, method, path string, body io.Reader, out any) error {
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

// send performs a request and turns any non-2xx answer into *Error, so
// callers only ever see a successful response body.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
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
