package gcpfake

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/api/googleapi"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newCloud(t *testing.T, opts Options) (*Cloud, string) {
	t.Helper()
	cloud, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cloud.Close)
	cloud.mu.Lock()
	cloud.tokens["test-token"] = true
	cloud.mu.Unlock()
	return cloud, cloud.URL() + "/compute/v1/projects/berth-project/zones/europe-west1-b/"
}

func call(t *testing.T, method, u, token string, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := googleapi.CheckResponse(resp); err != nil {
		return resp, map[string]any{"err": err}
	}
	var v map[string]any
	json.NewDecoder(resp.Body).Decode(&v)
	return resp, v
}

// Errors come in Google's envelope, which the client library parses into
// a googleapi.Error with the reason.
func TestErrorEnvelope(t *testing.T) {
	cloud, base := newCloud(t, Options{})
	for _, c := range []struct {
		token  string
		setup  func()
		code   int
		reason string
	}{
		{"", func() {}, 401, "authError"},
		{"forged", func() {}, 401, "authError"},
		{"test-token", func() { cloud.Throttle("instanceGroupManagers.get", 1, 429) }, 429, "rateLimitExceeded"},
		{"test-token", func() { cloud.Throttle("", 1, 403) }, 403, "rateLimitExceeded"},
		{"test-token", func() { cloud.Deny("instanceGroupManagers.get", true) }, 403, "forbidden"},
	} {
		c.setup()
		_, v := call(t, "GET", base+"instanceGroupManagers/berth-ci", c.token, "")
		cloud.Deny("instanceGroupManagers.get", false)
		ge, ok := v["err"].(*googleapi.Error)
		if !ok || ge.Code != c.code || len(ge.Errors) == 0 || ge.Errors[0].Reason != c.reason {
			t.Errorf("token %q: %v; want %d %s", c.token, v["err"], c.code, c.reason)
		}
	}
	if _, v := call(t, "GET", base+"instanceGroupManagers/other", "test-token", ""); v["err"].(*googleapi.Error).Code != 404 {
		t.Errorf("unknown group: %v; want 404", v["err"])
	}
}

// A mutation retried with its requestId returns the first operation and is
// applied once; the operation is RUNNING until OperationTime has passed.
func TestRequestIDAndOperations(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)}
	cloud, base := newCloud(t, Options{Clock: clk.now, OperationTime: 10 * time.Second})
	body := `{"instances": ["zones/europe-west1-b/instances/nope"], "skipInstancesOnValidationError": true}`
	_, op1 := call(t, "POST", base+"instanceGroupManagers/berth-ci/resize?size=2&requestId=r1", "test-token", "")
	_, op2 := call(t, "POST", base+"instanceGroupManagers/berth-ci/resize?size=2&requestId=r1", "test-token", "")
	if op1["name"] == nil || op1["name"] != op2["name"] || op1["status"] != "RUNNING" {
		t.Fatalf("operations %v and %v for one requestId; want the same, RUNNING", op1, op2)
	}
	if n := len(cloud.Instances()); n != 2 {
		t.Errorf("%d instances after resize to 2, want 2", n)
	}
	if _, v := call(t, "POST", base+"instanceGroupManagers/berth-ci/deleteInstances?requestId=r2", "test-token", body); v["err"] != nil {
		t.Errorf("deleteInstances skipping a non-member: %v", v["err"])
	}
	clk.add(10 * time.Second)
	_, done := call(t, "GET", base+"operations/"+url.PathEscape(op1["name"].(string)), "test-token", "")
	if done["status"] != "DONE" {
		t.Errorf("operation after OperationTime: %v; want DONE", done)
	}
}
