package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/fleet"
	"github.com/berth-ci/berth/internal/browsertest"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/jobsource/queue"
	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/scaler"
)

// TestConsoleDetailsInTheBrowser checks what a new user tripped on (issue
// 34) in chromium, on a fresh install's console: a deep link survives
// sign-in; numeric headers sit over their numbers; a wait under a second
// is not "0s"; the 24 h chart spans the data, not 24 empty hours; charts
// have axis titles; jobs show how long they ran and a queued one why it
// waits; "Cancel job" shows only
// for a job that can be canceled; a scale-in names its instances and why.
func TestConsoleDetailsInTheBrowser(t *testing.T) {
	ctx := browsertest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := scaler.Config{CapacityPerInstance: 1, MaxInstances: 2,
		Policies:      scaler.FixedPolicy(policy.Policy{IdleCount: 1, IdleTime: time.Hour}),
		ThrottleLimit: 1e6, ThrottleBurst: 2}
	f := fleet.New(scaler.New(cfg, time.Now()), fleet.Options{Provider: sim.New(sim.Config{}, time.Now), Logger: log,
		UpdateInterval: time.Hour, TickInterval: time.Hour})
	fctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(fctx)
	q, err := queue.Open(t.TempDir(), queue.WithLogger(log), queue.WithWaitReason(func(j *api.Job) {
		j.WaitingFor, j.WaitingDetail = api.WaitMaxInstances, "every slot is in use and the fleet is at max_instances"
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	// A job that waited well under a second and ran, and one still queued.
	if _, err := q.Submit(api.JobRequest{Script: "make test"}); err != nil {
		t.Fatal(err)
	}
	ran, err := q.Request(context.Background())
	if err != nil || ran == nil {
		t.Fatalf("request: %v %v", ran, err)
	}
	ran.Started("sim-1")
	time.Sleep(20 * time.Millisecond) // a job that ran for some time
	if err := ran.Finish(context.Background(), jobsource.Result{ExitCode: 0, Instance: "sim-1"}); err != nil {
		t.Fatal(err)
	}
	queued, err := q.Submit(api.JobRequest{Script: "make lint"})
	if err != nil {
		t.Fatal(err)
	}
	const token = "berth_fresh_install"
	c := New(Options{Authenticate: func(tok string) (api.Principal, bool) {
		return api.Principal{Name: api.AdminName, Admin: true}, tok == token
	}, Fleet: f, Jobs: q, JobAPI: q.Handler(), Logger: log,
		Health: func() any { return map[string]any{"status": "ok"} }})
	now := time.Now()
	for i := range 5 { // five minutes of history: a fresh install
		c.History().Sample(now.Add(time.Duration(i-5)*time.Minute), f.Counts())
	}
	c.History().Observe(now, scaler.Scaled{Direction: "in", N: 1, Have: 2, Want: 1})
	c.History().Observe(now, scaler.Decrease{ID: "sim-7", Reason: scaler.ReasonIdle})
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()

	// A deep link, before sign-in, lands on its page after it.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/ui/#jobs"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("header nav a.on"))); err != nil {
		t.Fatal(err)
	}
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); !strings.HasSuffix(loc, "/ui/#jobs") {
		t.Errorf("the deep link /ui/#jobs led to %s after sign-in", loc)
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#nav-jobs"))); err != nil {
			t.Fatal(err)
		}
	}
	row := fmt.Sprintf("#job-queue-%s", ran.ID())
	if err := browsertest.WaitFor(ctx, "the jobs", fmt.Sprintf(`!!document.querySelector(%q)`, row)); err != nil {
		t.Fatal(err)
	}
	// Every numeric cell sits under a heading aligned as it is.
	misaligned, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(() => {
		const out = [];
		for (const tr of document.querySelectorAll("#jobs tbody tr")) {
			const ths = document.querySelectorAll("#jobs thead th");
			if (tr.cells.length !== ths.length) out.push("row with " + tr.cells.length + " cells under " + ths.length + " headings");
			[...tr.cells].forEach((td, i) => {
				if (ths[i] && getComputedStyle(td).textAlign !== getComputedStyle(ths[i]).textAlign) out.push(ths[i].textContent);
			});
		}
		return out; })()`))
	if err != nil || len(misaligned) > 0 {
		t.Errorf("headings aligned unlike their cells: %v %v", misaligned, err)
	}
	wait, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row+" td.wait")))
	ranFor, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row+" td.ran")))
	if !strings.HasSuffix(wait, "ms") && !strings.HasSuffix(wait, "s") || wait == "0s" || wait == "" {
		t.Errorf("a wait under a second shows %q; want e.g. 412ms", wait)
	}
	if ranFor == "" || ranFor == "0s" {
		t.Errorf("the job's duration shows %q", ranFor)
	}
	if why, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#job-queue-"+queued.ID+" td.why"))); why != "waiting for max_instances" {
		t.Errorf("the queued job's reason shows %q; want why it waits", why)
	}
	// "Cancel job": not on a finished job, on a queued one.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(row)), chromedp.WaitVisible(chromedp.CSS("#log-box"))); err != nil {
		t.Fatal(err)
	}
	if err := waitBriefly(ctx, "no Cancel on a finished job", `document.getElementById("log-cancel").hidden`); err != nil {
		t.Error(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#job-queue-"+queued.ID))); err != nil {
		t.Fatal(err)
	}
	if err := waitBriefly(ctx, "Cancel on a queued job", `!document.getElementById("log-cancel").hidden`); err != nil {
		t.Error(err)
	}
	// The fleet's 24 h chart spans the five minutes there are, with axis titles.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#nav-fleet")), chromedp.WaitVisible(chromedp.CSS("#page-fleet"))); err != nil {
		t.Fatal(err)
	}
	if err := browsertest.WaitFor(ctx, "the fleet chart", `!!document.querySelector("#chart-fleet canvas")`); err != nil {
		t.Fatal(err)
	}
	span, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/ui/api/fleet?from="+(Math.floor(Date.now()/1000)-86400)+"&to="+Math.floor(Date.now()/1000)).then(r => r.json()).then(d => d.series.t[d.series.t.length-1] - d.series.t[0])`, chromedp.EvalAwaitPromise))
	if err != nil || span > 15*60 {
		t.Errorf("the 24 h chart of a 5-minute-old install spans %d s (%v); want the data's span", span, err)
	}
	for _, id := range []string{"chart-fleet"} {
		axes, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.getElementById(%q).dataset.axes || ""`, id)))
		if axes == "" || strings.Contains("|"+axes+"|", "||") {
			t.Errorf("%s has axes %q; want every axis titled", id, axes)
		}
	}
	// A scale-in names its instance and why.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#nav-decisions")), chromedp.WaitVisible(chromedp.CSS("#page-decisions"))); err != nil {
		t.Fatal(err)
	}
	if err := waitBriefly(ctx, "the scale-in naming sim-7 and idle_timeout", `[...document.querySelectorAll("#decisions tbody td.insts")].some(td => td.textContent.includes("sim-7") && td.textContent.includes("idle_timeout"))`); err != nil {
		t.Errorf("%v\n%s", err, browsertest.BodyText(ctx))
	}
}

// waitBriefly is browsertest.WaitFor for a state the page reaches at its
// next refresh (a few seconds): a failure does not cost the test's whole
// budget.
func waitBriefly(ctx context.Context, what, js string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return browsertest.WaitFor(ctx, what, js)
}
