package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/gitlabfake"
)

// browser is an HTTP client that keeps cookies and does not follow
// redirects, as a test needs to see them.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, path string, form url.Values, header map[string]string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, string(out)
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn fetches the login form and posts token with the form's CSRF token.
func (b *browser) signIn(token string) (*http.Response, string) {
	b.t.Helper()
	_, page := b.do("GET", "/ui/login", nil, nil)
	m := csrfInput.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("login form without a CSRF field:\n%s", page)
	}
	return b.do("POST", "/ui/login", url.Values{"csrf": {m[1]}, "token": {token}}, nil)
}

func TestConsoleShowsNothingBeforeSignIn(t *testing.T) {
	s := newAPIServer(t)
	if _, err := s.client(s.admin).Submit(context.Background(), api.JobRequest{Script: "echo secret-script"}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s.url)
	resp, _ := b.do("GET", "/ui/", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login" {
		t.Errorf("GET /ui/ without a session: %d to %q; want 303 to /ui/login", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, p := range []string{"/ui/api/fleet", "/ui/api/jobs", "/ui/api/jobs/1/log", "/ui/api/waits", "/ui/api/decisions", "/ui/api/health"} {
		resp, body := b.do("GET", p, nil, nil)
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "secret-script") {
			t.Errorf("GET %s without a session: %d %s; want 401 and nothing about jobs", p, resp.StatusCode, body)
		}
	}
	// A bearer token is no way into the console: its pages are for browsers.
	resp, _ = b.do("GET", "/ui/api/jobs", nil, map[string]string{"Authorization": "Bearer " + s.admin})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("console data with a bearer token but no session: %d; want 401", resp.StatusCode)
	}
	// Static assets carry no data and load before sign-in (the login page's style).
	if resp, _ := b.do("GET", "/ui/static/app.css", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /ui/static/app.css: %d", resp.StatusCode)
	}
	for _, p := range []string{"/ui/static/", "/ui/static/index.html"} {
		if resp, _ := b.do("GET", p, nil, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d; want 404 (no listing, no templates)", p, resp.StatusCode)
		}
	}
}

func TestConsoleSignInSetsAStrictHttpOnlyCookie(t *testing.T) {
	s := newAPIServer(t)
	b := newBrowser(t, s.url)
	resp, body := b.signIn("berth_wrong")
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not valid") || hasCookie(resp, "berth_session") {
		t.Fatalf("sign-in with a wrong token: %d, cookies %v\n%s", resp.StatusCode, resp.Cookies(), body)
	}
	resp, _ = b.signIn(s.admin)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("sign-in with the admin token: %d to %q; want 303 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	var ses *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "berth_session" {
			ses = c
		}
	}
	if ses == nil || !ses.HttpOnly || ses.SameSite != http.SameSiteStrictMode || ses.Path != "/ui/" || len(ses.Value) < 40 {
		t.Fatalf("session cookie %+v; want HttpOnly, SameSite=Strict, Path=/ui/, a long random value", ses)
	}
	if strings.Contains(ses.Value, s.admin) {
		t.Fatal("the session cookie holds the token")
	}
	resp, page := b.do("GET", "/ui/", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `name="csrf"`) || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("GET /ui/ signed in: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
	resp, body = b.do("GET", "/ui/api/fleet", nil, nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") == "" {
		t.Fatalf("GET /ui/api/fleet signed in: %d %s", resp.StatusCode, body)
	}
	again, _ := b.do("GET", "/ui/api/fleet", nil, map[string]string{"If-None-Match": resp.Header.Get("ETag")})
	if again.StatusCode != http.StatusNotModified {
		t.Errorf("unchanged fleet with If-None-Match: %d; want 304", again.StatusCode)
	}
}

func TestConsoleChangesNeedTheCSRFToken(t *testing.T) {
	s := newAPIServer(t)
	job, err := s.client(s.admin).Submit(context.Background(), api.JobRequest{Script: "sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s.url)
	// A login form posted without the form's token (from another site) is refused.
	resp, _ := b.do("POST", "/ui/login", url.Values{"token": {s.admin}}, nil)
	if resp.StatusCode != http.StatusForbidden || hasCookie(resp, "berth_session") {
		t.Fatalf("login without the CSRF token: %d; want 403 and no session", resp.StatusCode)
	}
	b.signIn(s.admin)
	_, page := b.do("GET", "/ui/", nil, nil)
	csrf := csrfInput.FindStringSubmatch(page)[1]
	cancel := "/ui/api/jobs/" + job.ID + "/cancel"
	for name, h := range map[string]map[string]string{
		"no token":     {},
		"wrong token":  {"X-CSRF-Token": csrf + "x"},
		"other origin": {"X-CSRF-Token": csrf, "Origin": "https://evil.example"},
	} {
		if resp, body := b.do("POST", cancel, nil, h); resp.StatusCode != http.StatusForbidden {
			t.Errorf("cancel with %s: %d %s; want 403", name, resp.StatusCode, body)
		}
	}
	if j, _ := s.m.queue.Get(job.ID); j.State != api.JobQueued {
		t.Fatalf("a refused cancel canceled the job: %s", j.State)
	}
	resp, body := b.do("POST", cancel, nil, map[string]string{"X-CSRF-Token": csrf, "Origin": s.url})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel with the CSRF token: %d %s", resp.StatusCode, body)
	}
	if j, _ := s.m.queue.Get(job.ID); j.State != api.JobCanceled {
		t.Errorf("job after cancel: %s; want canceled", j.State)
	}
	// Sign-out needs the token too, and ends the session.
	if resp, _ := b.do("POST", "/ui/logout", url.Values{}, nil); resp.StatusCode != http.StatusForbidden {
		t.Errorf("logout without the CSRF token: %d; want 403", resp.StatusCode)
	}
	b.do("POST", "/ui/logout", url.Values{"csrf": {csrf}}, nil)
	if resp, _ := b.do("GET", "/ui/api/jobs", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("console data after sign-out: %d; want 401", resp.StatusCode)
	}
}

func TestConsoleKeepsTheHostCheck(t *testing.T) {
	s := newAPIServer(t)
	b := newBrowser(t, s.url)
	for _, p := range []string{"/ui/login", "/ui/", "/ui/api/jobs"} {
		if resp, _ := b.do("GET", p, nil, map[string]string{"Host": "rebind.example:8080"}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s with a foreign Host: %d; want 403", p, resp.StatusCode)
		}
	}
	if resp, _ := b.do("GET", "/ui/../api/v1/jobs", nil, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unclean console path: %d; want 400", resp.StatusCode)
	}
}

func TestConsoleSubmitterSeesOnlyItsJobs(t *testing.T) {
	s := newAPIServer(t)
	ctx := context.Background()
	alice := s.addSubmitter(t, "alice")
	if _, err := s.client(s.admin).Submit(ctx, api.JobRequest{Script: "echo admin-job"}); err != nil {
		t.Fatal(err)
	}
	mine, err := alice.Submit(ctx, api.JobRequest{Script: "echo alice-job"})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s.url)
	b.signIn(alice.Token)
	resp, body := b.do("GET", "/ui/api/jobs", nil, nil)
	var list struct{ Jobs []struct{ ID, Script string } }
	if err := json.Unmarshal([]byte(body), &list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("alice's job list: %d %s", resp.StatusCode, body)
	}
	if len(list.Jobs) != 1 || list.Jobs[0].ID != mine.ID || strings.Contains(body, "admin-job") {
		t.Errorf("alice sees %s; want only her job %s", body, mine.ID)
	}
	if resp, body := b.do("GET", "/ui/api/jobs/1/log", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("alice reads the admin's job log: %d %s; want 404", resp.StatusCode, body)
	}
	// Removing her token ends her session at once.
	s.removeSubmitter(t, "alice")
	if resp, _ := b.do("GET", "/ui/api/jobs", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("console after alice's token was removed: %d; want 401", resp.StatusCode)
	}
}

func hasCookie(resp *http.Response, name string) bool {
	for _, c := range resp.Cookies() {
		if c.Name == name && c.MaxAge >= 0 && c.Value != "" {
			return true
		}
	}
	return false
}

// removeSubmitter revokes NAME's token the way an admin would.
func (s *apiServer) removeSubmitter(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(s.dir, api.TokensDirName, name)); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleOverTLS signs in over berth's TLS listener: the console is
// on the API's listener, and its cookie is marked Secure there.
func TestConsoleOverTLS(t *testing.T) {
	tm := startTLSManager(t)
	tok := tm.token
	b := newBrowser(t, "https://berth.test:"+tm.port)
	b.c.Transport = tm.transport
	resp, body := b.signIn(tok)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in over TLS: %d %s", resp.StatusCode, body)
	}
	secure := false
	for _, c := range resp.Cookies() {
		if c.Name == "berth_session" {
			secure = c.Secure
		}
	}
	if !secure {
		t.Error("the session cookie over TLS is not Secure")
	}
	if resp, body := b.do("GET", "/ui/api/fleet", nil, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("fleet over TLS: %d %s", resp.StatusCode, body)
	}
}

// TestConsoleListsGitLabJobs runs a GitLab job and finds it on the jobs
// page, filtered by source, with the instance it ran on.
func TestConsoleListsGitLabJobs(t *testing.T) {
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-good", TraceUpdateInterval: 1})
	defer fake.Close()
	id := fake.AddJob(gitlabfake.JobSpec{Variables: []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}}, Script: []string{"echo hi"}})
	m, base := startBerthAt(t, fmt.Sprintf("[[source]]\nkind = \"gitlab\"\nurl = %q\ntoken = \"glrt-good\"\ncheck_interval = \"100ms\"\n[autoscaler]\nmax_instances = 1\n", fake.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := fake.WaitAllDone(ctx); err != nil {
		t.Fatal(err)
	}
	tok, err := api.ReadTokenFile(api.TokenPath(m.cfg.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, base)
	b.signIn(tok)
	var list struct {
		Jobs []struct{ Source, ID, State, Instance string }
	}
	for ctx.Err() == nil { // the job's end reaches the console just after GitLab hears of it
		_, body := b.do("GET", "/ui/api/jobs?source=gitlab", nil, nil)
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		if len(list.Jobs) == 1 && list.Jobs[0].State == "success" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(list.Jobs) != 1 || list.Jobs[0].ID != fmt.Sprint(id) || list.Jobs[0].Instance == "" || list.Jobs[0].State != "success" {
		t.Fatalf("GitLab jobs on the console: %+v; want job %d, succeeded, with its instance", list.Jobs, id)
	}
	_, body := b.do("GET", "/ui/api/jobs?source=queue", nil, nil)
	if strings.Contains(body, `"gitlab"`) {
		t.Errorf("source=queue lists GitLab jobs: %s", body)
	}
}
