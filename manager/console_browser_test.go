package manager

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/internal/browsertest"
)

// startBerthAt runs berth (local provider, real jobs) and returns it with
// its base URL.
func startBerthAt(t *testing.T, toml string) (*Manager, string) {
	t.Helper()
	dir := t.TempDir()
	full := fmt.Sprintf("listen = \"127.0.0.1:0\"\nstate_dir = %q\n%s", filepath.Join(dir, "state"), toml)
	cfg, err := config.Parse([]byte(full), filepath.Join(dir, "berth.toml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m, err := New(ctx, cfg, slog.New(slog.DiscardHandler), Options{ShutdownGrace: 10 * time.Second, UpdateInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	m.opts.Ready = ready
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("berth stopped at start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		<-done
		deleteSandboxes(t, filepath.Join(dir, "state", "provider", "local"))
	})
	return m, "http://" + addr
}

// TestConsoleInBrowser drives the console in chromium against a berth
// that runs real jobs in local sandboxes: nothing shows before sign-in,
// an instance and a job appear without a reload, a running job's log
// streams and the page cancels it (with its CSRF token), and
// a submitter sees only its own jobs.
func TestConsoleInBrowser(t *testing.T) {
	ctx := browsertest.New(t)
	m, base := startBerthAt(t, "[autoscaler]\nmax_instances = 2\n")
	admin, err := api.ReadTokenFile(api.TokenPath(m.cfg.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	client := api.NewClient(base)
	client.Token = admin

	// Before sign-in: the login form, and no data from the data endpoints.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token"))); err != nil {
		t.Fatal(err)
	}
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); !strings.HasSuffix(loc, "/ui/login") {
		t.Errorf("/ui/ before sign-in went to %s; want the login form", loc)
	}
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/ui/api/jobs").then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != 401 {
		t.Errorf("jobs from the page before sign-in: %d, %v; want 401", status, err)
	}

	if err := browsertest.SignIn(ctx, base, admin); err != nil {
		t.Fatal(err)
	}
	// Mark the page: a reload would lose the mark.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`window.berthMark = 1`)); err != nil {
		t.Fatal(err)
	}
	job, err := client.Submit(ctx, api.JobRequest{Script: "echo hello-from-the-console-test; echo second-line; while :; do sleep 1; done"})
	if err != nil {
		t.Fatal(err)
	}
	if err := browsertest.WaitFor(ctx, "an instance on the fleet page", `document.querySelectorAll("#instances tbody tr").length > 0`); err != nil {
		t.Fatalf("%v\n%s", err, browsertest.BodyText(ctx))
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#nav-jobs"))); err != nil {
		t.Fatal(err)
	}
	if err := browsertest.WaitFor(ctx, "the job on the jobs page", fmt.Sprintf(`!!document.getElementById("job-queue-%s")`, job.ID)); err != nil {
		t.Fatalf("%v\n%s", err, browsertest.BodyText(ctx))
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#job-queue-"+job.ID))); err != nil {
		t.Fatal(err)
	}
	if err := browsertest.WaitFor(ctx, "the job's log", `document.getElementById("log").textContent.includes("second-line")`); err != nil {
		log, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#log")))
		t.Fatalf("%v; log so far: %q", err, log)
	}
	// The job never ends by itself: its log was streamed while it ran.
	if j, err := client.Job(ctx, job.ID); err != nil || j.State != api.JobRunning {
		t.Fatalf("job while its log shows: %+v, %v; want running", j, err)
	}
	browsertest.Screenshot(t, ctx, "jobs")
	// Cancel from the page: a POST with the page's CSRF token.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#log-cancel"))); err != nil {
		t.Fatal(err)
	}
	if err := browsertest.WaitFor(ctx, "the job canceled", fmt.Sprintf(`document.querySelector("#job-queue-%s .state").textContent == "canceled"`, job.ID)); err != nil {
		t.Fatalf("%v\n%s", err, browsertest.BodyText(ctx))
	}
	for _, page := range []string{"waits", "decisions", "health"} {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#nav-"+page)), chromedp.WaitVisible(chromedp.CSS("#page-"+page))); err != nil {
			t.Fatal(err)
		}
	}
	if err := browsertest.WaitFor(ctx, "the health page", `document.getElementById("health").textContent.includes("state_dir")`); err != nil {
		t.Errorf("%v\n%s", err, browsertest.BodyText(ctx))
	}
	// A real berth's health (queue, state dir, free space), not the
	// simulation's: this is docs/console-health.png.
	browsertest.Screenshot(t, ctx, "health")
	if mark, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`window.berthMark || 0`)); mark != 1 {
		t.Error("the page reloaded: the console should update in place")
	}

	// A submitter signs in in the same browser after the cookies are gone.
	if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	status, err = chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/ui/api/fleet").then(r => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != 401 {
		t.Errorf("fleet from the page without the cookie: %d, %v; want 401", status, err)
	}
	bob := addSubmitterToken(t, m.cfg.StateDir, "bob")
	bc := api.NewClient(base)
	bc.Token = bob
	bobJob, err := bc.Submit(ctx, api.JobRequest{Script: "echo bob-was-here"})
	if err != nil {
		t.Fatal(err)
	}
	if err := browsertest.SignIn(ctx, base, bob); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#nav-jobs"))); err != nil {
		t.Fatal(err)
	}
	if err := browsertest.WaitFor(ctx, "bob's job", fmt.Sprintf(`!!document.getElementById("job-queue-%s")`, bobJob.ID)); err != nil {
		t.Fatalf("%v\n%s", err, browsertest.BodyText(ctx))
	}
	rows, _ := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#jobs tbody tr").length`))
	if text := browsertest.BodyText(ctx); rows != 1 || strings.Contains(text, "hello-from-the-console-test") {
		t.Errorf("bob sees %d jobs; want only his own:\n%s", rows, text)
	}
}

// addSubmitterToken writes a token file for name and returns the token.
func addSubmitterToken(t *testing.T, stateDir, name string) string {
	t.Helper()
	d := filepath.Join(stateDir, api.TokensDirName)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	tok := api.NewToken()
	if err := os.WriteFile(filepath.Join(d, name), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return tok
}

// The jobs table names the admin as the owner of its jobs (the API leaves
// them without one), and the "Ran" of a running job advances while the
// list, polled with If-None-Match, does not change (issue 46).
func TestConsoleOwnerAndLiveRan(t *testing.T) {
	ctx := browsertest.New(t)
	m, base := startBerthAt(t, "[autoscaler]\nmax_instances = 1\n")
	admin, err := api.ReadTokenFile(api.TokenPath(m.cfg.StateDir))
	if err != nil {
		t.Fatal(err)
	}
	client := api.NewClient(base)
	client.Token = admin
	job, err := client.Submit(ctx, api.JobRequest{Script: "echo started; while :; do sleep 1; done"})
	if err != nil {
		t.Fatal(err)
	}
	if err := browsertest.SignIn(ctx, base, admin); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#nav-jobs"))); err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`document.getElementById("job-queue-%s")`, job.ID)
	if err := browsertest.WaitFor(ctx, "the job running on the jobs page", row+` && `+row+`.querySelector(".state").textContent == "running"`); err != nil {
		t.Fatalf("%v\n%s", err, browsertest.BodyText(ctx))
	}
	owner, err := chromedp.Run(ctx, chromedp.Evaluate[string](row+`.querySelector(".owner").textContent`))
	if err != nil || owner != "admin" {
		t.Errorf("owner of the admin's job = %q, %v; want admin", owner, err)
	}
	first, err := chromedp.Run(ctx, chromedp.Evaluate[string](row+`.querySelector(".ran").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if err := browsertest.WaitFor(ctx, "Ran to advance from "+first, fmt.Sprintf(`%s.querySelector(".ran").textContent != %q`, row, first)); err != nil {
		t.Errorf("%v: the running job's Ran stays at %s", err, first)
	}
	if _, err := client.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
}
