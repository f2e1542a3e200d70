package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/jobsource/queue"
	_ "github.com/berth-ci/berth/provider/sim" // registers provider "sim"
)

// apiServer is a berth (simulated provider, not running jobs) serving its
// real handler over real HTTP.
type apiServer struct {
	m     *Manager
	url   string
	dir   string
	admin string // the admin token berth created
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen = \"127.0.0.1:0\"\nstate_dir = %q\n[autoscaler]\nprovider = \"sim\"\n", dir)), filepath.Join(dir, "berth.toml"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(func() { srv.Close(); m.close(context.Background()) })
	tok, err := api.ReadTokenFile(filepath.Join(dir, "api-token"))
	if err != nil {
		t.Fatalf("berth did not create its API token: %v", err)
	}
	return &apiServer{m: m, url: srv.URL, dir: dir, admin: tok}
}

// addSubmitter gives NAME a token the way an admin would: a file in api-tokens/.
func (s *apiServer) addSubmitter(t *testing.T, name string) *api.Client {
	t.Helper()
	d := filepath.Join(s.dir, api.TokensDirName)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	tok := api.NewToken()
	if err := os.WriteFile(filepath.Join(d, name), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s.client(tok)
}

func (s *apiServer) client(token string) *api.Client {
	c := api.NewClient(s.url)
	c.Token = token
	return c
}

// raw sends one request as written and returns status, content type and body.
func (s *apiServer) raw(t *testing.T, method, path, token, contentType, host, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if path != "" && req.URL.Path != path { // keep "..": NewRequest would not clean it, but be sure
		req.URL.Path = path
	}
	req.URL.Opaque = path
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if host != "" {
		req.Host = host
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

func TestAPIWantsTheToken(t *testing.T) {
	s := newAPIServer(t)
	fi, err := os.Stat(filepath.Join(s.dir, "api-token"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("api-token: %v, mode %v; want 0600", err, fi.Mode())
	}
	// Every endpoint but /healthz and /metrics, with no token and with a wrong one.
	for _, ep := range []struct{ method, path, body string }{
		{"POST", "/api/v1/jobs", `{"script": "id"}`},
		{"GET", "/api/v1/jobs", ""},
		{"GET", "/api/v1/jobs/1", ""},
		{"GET", "/api/v1/jobs/1/log", ""},
		{"POST", "/api/v1/jobs/1/cancel", ""},
		{"GET", "/api/v1/instances", ""},
		{"GET", "/no/such/thing", ""},
	} {
		for _, tok := range []string{"", "berth_wrong", s.admin + "x"} {
			code, ctype, body := s.raw(t, ep.method, ep.path, tok, "application/json", "", ep.body)
			if code != http.StatusUnauthorized || ctype != "application/json" || !strings.Contains(body, "api-token") || !strings.Contains(body, api.TokenEnv) {
				t.Errorf("%s %s with token %q: %d %s %s; want a JSON 401 that says where the token is", ep.method, ep.path, tok, code, ctype, body)
			}
		}
	}
	jobs, err := s.m.queue.List("", 0)
	if err != nil || len(jobs) != 0 {
		t.Errorf("jobs after refused submits: %v, %v; want none", jobs, err)
	}
	for _, open := range []string{"/healthz", "/metrics"} {
		if code, _, body := s.raw(t, "GET", open, "", "", "", ""); code != http.StatusOK {
			t.Errorf("GET %s without a token: %d %s; it should stay open", open, code, body)
		}
	}
	c := s.client(s.admin)
	if _, err := c.Submit(context.Background(), api.JobRequest{Script: "true"}); err != nil {
		t.Errorf("submit with the admin token: %v", err)
	}
}

func TestAPIRefusesForeignHostsFormsAndUncleanPaths(t *testing.T) {
	s := newAPIServer(t)
	cases := []struct {
		name                      string
		method, path, ctype, host string
		body                      string
		want                      int
		says                      string
	}{
		{"DNS rebinding", "GET", "/api/v1/jobs", "", "attacker.example:8765", "", http.StatusForbidden, "DNS rebinding"},
		{"rebinding to /healthz", "GET", "/healthz", "", "attacker.example", "", http.StatusForbidden, "DNS rebinding"},
		{"localhost", "GET", "/api/v1/jobs", "", "localhost:8765", "", http.StatusOK, ""},
		{"form post (CSRF)", "POST", "/api/v1/jobs", "application/x-www-form-urlencoded", "", "script=id", http.StatusUnsupportedMediaType, "application/json"},
		{"text/plain post (CSRF)", "POST", "/api/v1/jobs", "text/plain", "", `{"script":"id"}`, http.StatusUnsupportedMediaType, "CSRF"},
		{"cancel without a type", "POST", "/api/v1/jobs/1/cancel", "", "", "", http.StatusUnsupportedMediaType, "application/json"},
		{"json with charset", "POST", "/api/v1/jobs", "application/json; charset=utf-8", "", `{"script":"id"}`, http.StatusCreated, ""},
		{"dot-dot", "GET", "/api/v1/jobs/../x", "", "", "", http.StatusBadRequest, "canonical"},
		{"dot", "GET", "/api/v1/./jobs", "", "", "", http.StatusBadRequest, "canonical"},
		{"double slash", "GET", "/api//v1/jobs", "", "", "", http.StatusBadRequest, "canonical"},
		{"dot-dot without a token", "GET", "/api/v1/jobs/../../etc/passwd", "", "", "", http.StatusBadRequest, "canonical"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tok := s.admin
			if tc.name == "dot-dot without a token" {
				tok = ""
			}
			code, ctype, body := s.raw(t, tc.method, tc.path, tok, tc.ctype, tc.host, tc.body)
			if code != tc.want || ctype != "application/json" || !strings.Contains(body, tc.says) {
				t.Errorf("%s %s: %d %s %s; want JSON %d saying %q", tc.method, tc.path, code, ctype, body, tc.want, tc.says)
			}
		})
	}
}

func TestHealthzDegradedWhileTheQueueCannotWrite(t *testing.T) {
	s := newAPIServer(t)
	var h health
	code, _, body := s.raw(t, "GET", "/healthz", "", "", "", "")
	if err := json.Unmarshal([]byte(body), &h); err != nil || code != 200 || h.Status != "ok" {
		t.Fatalf("healthy berth: %d %s", code, body)
	}
	// bbolt's MaxSize refuses to grow the file exactly as a full disk would.
	s.m.queue.Close()
	q, err := queue.Open(filepath.Join(s.dir, "queue"), queue.WithLogger(slog.New(slog.DiscardHandler)), queue.WithMaxDBSize(256<<10))
	if err != nil {
		t.Fatal(err)
	}
	s.m.queue = q
	srv := httptest.NewServer(s.m.Handler()) // the handler binds the queue it was built with
	defer srv.Close()
	s.url = srv.URL
	c := s.client(s.admin)
	script := strings.Repeat("echo fill the database\n", 2000)
	var full *api.Error
	for range 100 {
		if _, err := c.Submit(context.Background(), api.JobRequest{Script: script}); errors.As(err, &full) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if full == nil || full.Status != http.StatusInsufficientStorage {
		t.Fatalf("the queue never filled up: %v", full)
	}
	code, _, body = s.raw(t, "GET", "/healthz", "", "", "", "")
	h = health{}
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatal(err)
	}
	if code != http.StatusServiceUnavailable || h.Status != "degraded" || len(h.Problems) != 1 ||
		!strings.Contains(h.Problems[0], "queue.db") || !strings.Contains(h.Problems[0], "free disk space") {
		t.Errorf("/healthz while the queue cannot write: %d %s; want 503 degraded naming queue.db and what to do", code, body)
	}
}

func TestResumeKeyIsCheckedAtSubmit(t *testing.T) {
	s := newAPIServer(t)
	c := s.client(s.admin)
	ctx := context.Background()
	cases := []struct {
		key  string
		want int
		says string
	}{
		{"0123456789abcdef-feedfacefeedface", http.StatusBadRequest, "another berth state"},
		{s.m.store.ID() + "-00000000deadbeef", http.StatusNotFound, "no parked environment"},
	}
	for _, tc := range cases {
		_, err := c.Submit(ctx, api.JobRequest{Script: "true", Resume: tc.key})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != tc.want || !strings.Contains(ae.Message, tc.says) {
			t.Errorf("resume %s: %v; want %d saying %q", tc.key, err, tc.want, tc.says)
		}
	}
	if jobs, _ := s.m.queue.List("", 0); len(jobs) != 0 {
		t.Errorf("refused resumes left %d jobs queued", len(jobs))
	}
}

func TestSubmittersSeeOnlyTheirOwnJobs(t *testing.T) {
	s := newAPIServer(t)
	ctx := context.Background()
	alice, bob := s.addSubmitter(t, "alice"), s.addSubmitter(t, "bob")
	aj, err := alice.Submit(ctx, api.JobRequest{Script: "echo alice", Env: map[string]string{"SECRET": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if aj.Owner != "alice" {
		t.Errorf("owner = %q, want alice", aj.Owner)
	}
	if _, err := bob.Submit(ctx, api.JobRequest{Script: "echo bob"}); err != nil {
		t.Fatal(err)
	}
	list, err := bob.Jobs(ctx)
	if err != nil || len(list) != 1 || list[0].Owner != "bob" {
		t.Errorf("bob's list: %+v, %v; want only bob's job", list, err)
	}
	var ae *api.Error
	if _, err := bob.Job(ctx, aj.ID); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Errorf("bob reads alice's job: %v; want 404", err)
	}
	if err := bob.Log(ctx, aj.ID, false, io.Discard); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Errorf("bob reads alice's log: %v; want 404", err)
	}
	if _, err := bob.Cancel(ctx, aj.ID); !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		t.Errorf("bob cancels alice's job: %v; want 404", err)
	}
	if j, _ := alice.Job(ctx, aj.ID); j.State != "queued" {
		t.Errorf("alice's job is %s after bob's attempts, want queued", j.State)
	}
	all, err := s.client(s.admin).Jobs(ctx)
	if err != nil || len(all) != 2 {
		t.Errorf("admin sees %d jobs, %v; want both", len(all), err)
	}
	// A removed token stops working at once.
	if err := os.Remove(filepath.Join(s.dir, api.TokensDirName, "bob")); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Jobs(ctx); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Errorf("bob after his token file was removed: %v; want 401", err)
	}
}
