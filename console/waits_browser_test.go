package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/browsertest"
	"github.com/berth-ci/berth/jobsource/queue"
	"github.com/berth-ci/berth/scaler"
)

// idleFleet is a fleet of no instances: these tests feed the history
// themselves and read only the waits page.
type idleFleet struct{}

func (idleFleet) Instances() []scaler.InstanceView { return nil }
func (idleFleet) Counts() scaler.Counts            { return scaler.Counts{} }

// openWaits serves a console over h's data (filled by fill) and opens its
// "Waits & cost" page in chromium over span (a range button's seconds).
func openWaits(t *testing.T, span int, fill func(h *History)) context.Context {
	t.Helper()
	ctx := browsertest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	q, err := queue.Open(t.TempDir(), queue.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	const token = "berth_waits"
	c := New(Options{Authenticate: func(tok string) (api.Principal, bool) {
		return api.Principal{Name: api.AdminName, Admin: true}, tok == token
	}, Fleet: idleFleet{}, Jobs: q, JobAPI: q.Handler(), Logger: log})
	fill(c.History())
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	if err := browsertest.SignIn(ctx, srv.URL, token); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#nav-waits")), chromedp.WaitVisible(chromedp.CSS("#page-waits")),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`.ranges[data-chart="waits"] button[data-span="%d"]`, span)))); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// chartDrawn waits until the chart with id was drawn from a request for
// span seconds and returns its x domain and the x values it drew (unix s).
func chartDrawn(t *testing.T, ctx context.Context, id string, span int) (lo, hi float64, drawn []int64) {
	t.Helper()
	asked := fmt.Sprintf(`performance.getEntriesByType("resource").map(e => new URL(e.name)).some(u => u.pathname == "/ui/api/waits" &&
		u.searchParams.get("to") - u.searchParams.get("from") == %d)`, span)
	if err := browsertest.WaitFor(ctx, "the page to ask for the range", asked); err != nil {
		t.Fatal(err)
	}
	sel := "#" + id
	if err := browsertest.WaitFor(ctx, id+" drawn", fmt.Sprintf(`document.querySelector(%q).dataset.xmax != null`, sel)); err != nil {
		t.Fatalf("%v\n%s", err, browsertest.BodyText(ctx))
	}
	d, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](fmt.Sprintf(`Object.assign({}, document.querySelector(%q).dataset)`, sel)))
	if err != nil {
		t.Fatal(err)
	}
	lo, err1 := strconv.ParseFloat(d["xmin"], 64)
	hi, err2 := strconv.ParseFloat(d["xmax"], 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: x domain %q..%q is not a number", id, d["xmin"], d["xmax"])
	}
	for _, f := range strings.Fields(d["drawn"]) {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("%s: drawn x %q: %v", id, f, err)
		}
		drawn = append(drawn, v)
	}
	return lo, hi, drawn
}

func unixDate(s float64) string { return time.Unix(int64(s), 0).UTC().Format(time.DateTime) }

// TestWaitsChartAxisSpansTheHoursItShows is a fresh berth's first hour:
// its waits all fall in one hour, the chart's one point. uPlot pads a lone
// point's time range by the size of a unix time, so the axis ran from 2027
// to 2029 with the hour at its left edge. The x domain must stay within
// an hour of the data's.
func TestWaitsChartAxisSpansTheHoursItShows(t *testing.T) {
	hourStart := time.Now().UTC().Truncate(time.Hour)
	ctx := openWaits(t, 86400, func(h *History) {
		for i := range 5 {
			h.JobStarted(hourStart, JobRef{Source: "queue", ID: fmt.Sprint(i + 1)}, "i-1", time.Duration(1+i)*time.Second)
		}
	})
	lo, hi, drawn := chartDrawn(t, ctx, "chart-waits", 86400)
	first := float64(hourStart.Unix())
	if len(drawn) != 1 || drawn[0] != hourStart.Unix() {
		t.Fatalf("the waits chart drew hours %v; want the one hour %d (%s)", drawn, hourStart.Unix(), unixDate(first))
	}
	if lo > first || hi < first || lo < first-3600 || hi > first+2*3600 {
		t.Errorf("the waits chart's x axis runs from %s to %s; want the hour %s within it, and no more than an hour either side",
			unixDate(lo), unixDate(hi), unixDate(first))
	}
	// The cost chart has one day, today, with the same trap.
	lo, hi, _ = chartDrawn(t, ctx, "chart-cost", 86400)
	today := float64(hourStart.Truncate(24 * time.Hour).Unix())
	if lo > today || hi < today || lo < today-86400 || hi > today+2*86400 {
		t.Errorf("the cost chart's x axis runs from %s to %s; want the day %s within it, and no more than a day either side",
			unixDate(lo), unixDate(hi), unixDate(today))
	}
}

// TestCostChartDrawsNoBarsForDaysWithoutData is a berth that ran three
// days ago and today: the two days between, and the days before it first
// ran, have no data. They were drawn as zero bars and listed as 0 hours,
// which reads as "berth ran, nothing cost", not "berth was down".
func TestCostChartDrawsNoBarsForDaysWithoutData(t *testing.T) {
	now := time.Now().UTC()
	today := now.Truncate(24 * time.Hour)
	ran := today.Add(-3 * 24 * time.Hour)
	ctx := openWaits(t, 7*86400, func(h *History) {
		for _, start := range []time.Time{ran.Add(10 * time.Hour), today} {
			for at := start; at.Before(start.Add(2*time.Hour)) && !at.After(now); at = at.Add(time.Minute) {
				h.Sample(at, counts(2, 0, 0, 1, 1))
			}
		}
	})
	_, _, drawn := chartDrawn(t, ctx, "chart-cost", 7*86400)
	want := []int64{ran.Unix(), today.Unix()}
	if fmt.Sprint(drawn) != fmt.Sprint(want) {
		t.Errorf("the cost chart drew bars for days %v; want only the days berth ran, %v", days(drawn), days(want))
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#cost tbody tr")].map(r => r.innerText.replace(/\s+/g, " ").trim())`))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Time{ran.Add(24 * time.Hour), ran.Add(48 * time.Hour)} {
		row := ""
		for _, r := range rows {
			if strings.HasPrefix(r, d.Format(time.DateOnly)) {
				row = r
			}
		}
		if !strings.Contains(row, "no data") {
			t.Errorf("the cost table's row for %s, a day berth did not run, is %q; want it to say no data\nrows: %q", d.Format(time.DateOnly), row, rows)
		}
	}
	for _, r := range rows {
		if strings.HasPrefix(r, ran.Add(-24*time.Hour).Format(time.DateOnly)) {
			t.Errorf("the cost table lists %q, a day before berth's first data", r)
		}
	}
}

func days(xs []int64) []string {
	out := []string{}
	for _, x := range xs {
		out = append(out, time.Unix(x, 0).UTC().Format(time.DateOnly))
	}
	return out
}
