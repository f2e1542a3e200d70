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

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/fleet"
	"github.com/berth-ci/berth/internal/browsertest"
	"github.com/berth-ci/berth/jobsource/queue"
	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider/sim"
	"github.com/berth-ci/berth/scaler"
)

// TestAWeekInTheBrowser opens every page of a console with a week of
// history (a real fleet of simulated instances, a real queue) in chromium,
// checks that the charts draw a few hundred points, not ten thousand, and
// that a zoom asks the server for the zoomed range. With
// BERTH_CONSOLE_SCREENSHOTS=DIR it writes the screenshots in docs/ (the
// jobs page's comes from the manager's TestConsoleInBrowser):
//
//	BERTH_CONSOLE_SCREENSHOTS=$PWD/docs go test ./console ./manager -run 'TestAWeekInTheBrowser|TestConsoleInBrowser'
func TestAWeekInTheBrowser(t *testing.T) {
	ctx := browsertest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	const n = 12
	cfg := scaler.Config{CapacityPerInstance: 2, MaxInstances: n,
		Policies:      scaler.FixedPolicy(policy.Policy{IdleCount: 2 * n, IdleTime: time.Hour}),
		ThrottleLimit: 1e6, ThrottleBurst: n}
	f := fleet.New(scaler.New(cfg, time.Now()), fleet.Options{Provider: sim.New(sim.Config{}, time.Now), Logger: log,
		UpdateInterval: time.Hour, TickInterval: time.Hour})
	fctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.Run(fctx)
	for f.Counts().InstancesByPhase["ready"] < n {
		f.Kick()
		time.Sleep(10 * time.Millisecond)
	}
	q, err := queue.Open(t.TempDir(), queue.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for _, s := range []string{"make test", "go test ./...", "npm ci && npm test"} {
		if _, err := q.Submit(api.JobRequest{Script: s}); err != nil {
			t.Fatal(err)
		}
	}
	const token = "berth_week_demo"
	c := New(Options{Authenticate: func(tok string) (api.Principal, bool) {
		return api.Principal{Name: api.AdminName, Admin: true}, tok == token
	}, Fleet: f, Jobs: q, JobAPI: q.Handler(), Logger: log,
		Health: func() any { return map[string]any{"status": "ok", "provider": "sim"} }})
	fillWeek(c.History(), f.Instances(), 3000)
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()

	if err := browsertest.SignIn(ctx, srv.URL, token); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.ranges[data-chart="fleet"] button[data-span="604800"]`))); err != nil {
		t.Fatal(err)
	}
	// The week is drawn from at most maxPoints buckets.
	points := fmt.Sprintf(`(() => { const u = document.querySelector("#chart-fleet .u-over"); return u && window.uPlot && document.querySelector("#chart-fleet canvas") })()`)
	if err := browsertest.WaitFor(ctx, "the fleet chart", points); err != nil {
		t.Fatalf("%v\n%s", err, browsertest.BodyText(ctx))
	}
	week, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch("/ui/api/fleet?from="+(Math.floor(Date.now()/1000)-7*86400)).then(r => r.json()).then(d => d.series.t.length)`, chromedp.EvalAwaitPromise))
	if err != nil || week > maxPoints || week < 300 {
		t.Errorf("a week of fleet history in %d points (%v); want a few hundred, at most %d", week, err, maxPoints)
	}
	if err := browsertest.WaitFor(ctx, "the instances", fmt.Sprintf(`document.querySelectorAll("#instances tbody tr").length == %d`, n)); err != nil {
		t.Fatal(err)
	}
	browsertest.Screenshot(t, ctx, "fleet")
	zoomFleetChart(t, ctx)
	for _, page := range []string{"jobs", "waits", "decisions", "health"} {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#nav-"+page)), chromedp.WaitVisible(chromedp.CSS("#page-"+page))); err != nil {
			t.Fatal(err)
		}
		if page == "waits" {
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`.ranges[data-chart="waits"] button[data-span="604800"]`))); err != nil {
				t.Fatal(err)
			}
			if err := browsertest.WaitFor(ctx, "a week of days in the cost table", `document.querySelectorAll("#cost tbody tr").length >= 7`); err != nil {
				t.Fatal(err)
			}
		}
		if page == "decisions" {
			if err := browsertest.WaitFor(ctx, "decisions", `document.querySelectorAll("#decisions tbody tr").length > 100`); err != nil {
				t.Fatal(err)
			}
		}
		if page != "jobs" && page != "health" { // the manager's browser test shows real jobs, a log and a real berth's health
			browsertest.Screenshot(t, ctx, page)
		}
	}
	if text := browsertest.BodyText(ctx); !strings.Contains(text, "Health") {
		t.Errorf("health page: %s", text)
	}
}

// zoomFleetChart drags across the middle fifth of the fleet chart and
// checks that the page asked the server for that range, which answers
// with finer buckets.
func zoomFleetChart(t *testing.T, ctx context.Context) {
	t.Helper()
	box, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => { const r = document.querySelector("#chart-fleet .u-over").getBoundingClientRect(); return [r.left, r.top, r.width, r.height] })()`))
	if err != nil {
		t.Fatal(err)
	}
	x0, x1, y := box[0]+box[2]*0.4, box[0]+box[2]*0.6, box[1]+box[3]/2
	if err := chromedp.Do(ctx,
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x0, y),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMousePressed, x0, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, (x0+x1)/2, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, x1, y, chromedp.ButtonLeft),
		chromedp.MouseEvent(input.DispatchMouseEventTypeMouseReleased, x1, y, chromedp.ButtonLeft),
	); err != nil {
		t.Fatal(err)
	}
	// The zoomed request spans about a fifth of the week (33.6 h; the
	// page first asked for 24 h, then 7 d).
	zoomed := `performance.getEntriesByType("resource").map(e => new URL(e.name)).some(u => u.pathname == "/ui/api/fleet" &&
		(u.searchParams.get("to") - u.searchParams.get("from")) > 26*3600 && (u.searchParams.get("to") - u.searchParams.get("from")) < 48*3600)`
	if err := browsertest.WaitFor(ctx, "a request for the zoomed range", zoomed); err != nil {
		t.Fatal(err)
	}
}
