package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berth-ci/berth/internal/browsertest"
)

// weekOfSamples is a replay's timeline of a week sampled every 10 s: a
// daily wave of demand with a spike every 6 hours.
func weekOfSamples() ([]Sample, Result) {
	t0 := time.Date(2020, 10, 5, 0, 0, 0, 0, time.UTC)
	var out []Sample
	for i := range 7 * 24 * 360 {
		at := t0.Add(time.Duration(i) * 10 * time.Second)
		demand := 50 + 40*((at.Hour()+6)%24)/24
		if at.Minute() == 0 && at.Hour()%6 == 0 {
			demand += 200
		}
		out = append(out, Sample{At: at, Demand: demand, Running: demand, Booting: i % 3, Suspended: 20, MaxWait: float64(i % 40)})
	}
	return out, Result{Policy: "berth", Trace: "travis_week.csv", Jobs: 50428, MaxInstances: 300, TargetWaitS: 15,
		BootTimeS: 60, CapacityPerInstance: 1, WaitP95S: 14}
}

func TestSVGOfAWeekIsAggregatedWithTicksAndTheLimit(t *testing.T) {
	samples, res := weekOfSamples()
	var b bytes.Buffer
	if err := WriteSVG(&b, samples, res); err != nil {
		t.Fatal(err)
	}
	svg := b.String()
	for _, line := range regexp.MustCompile(`points="([^"]*)"`).FindAllStringSubmatch(svg, -1) {
		if n := len(strings.Fields(line[1])); n > svgBuckets {
			t.Fatalf("a line of %d points for %d samples; want at most %d (one per bucket)", n, len(samples), svgBuckets)
		}
	}
	for _, want := range []string{"max_instances 300", "target 15s", "trace travis_week.csv", "UTC", "Tue 00h", ">300<", "faint: peak"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	// The 6-hourly spikes last one minute: the peak line keeps them.
	if !strings.Contains(svg, `stroke-opacity="0.30"`) {
		t.Error("no peak lines")
	}
	if len(svg) > 100<<10 {
		t.Errorf("SVG of a week is %d KB; aggregation should keep it small", len(svg)>>10)
	}
}

func TestBucketsKeepMeansAndPeaks(t *testing.T) {
	t0 := time.Unix(0, 0)
	var s []Sample
	for i := range 100 {
		s = append(s, Sample{At: t0.Add(time.Duration(i) * time.Second), Demand: i % 10, Running: 5, MaxWait: float64(i)})
	}
	bs := Buckets(s, 10)
	if len(bs) != 10 {
		t.Fatalf("%d buckets; want 10", len(bs))
	}
	for i, b := range bs[:9] { // the last bucket also takes the final sample
		if b.Samples != 10 || b.Demand != 4.5 || b.DemandMax != 9 || b.Running != 5 {
			t.Errorf("bucket %d: %+v; want 10 samples, mean demand 4.5, peak 9", i, b)
		}
	}
	if bs[9].MaxWait != 99 {
		t.Errorf("last bucket's longest wait %v; want 99", bs[9].MaxWait)
	}
	got := Buckets(s[:3], 10)
	if len(got) != 3 {
		t.Fatalf("3 samples in %d buckets; want one each", len(got))
	}
	for i, b := range got { // each point at its own sample's time, not all at the first
		if !b.At.Equal(s[i].At) || b.Samples != 1 || b.DemandMax != s[i].Demand {
			t.Errorf("bucket %d of 3 samples: at %v with %d samples, demand peak %d; want at %v, 1 sample, %d",
				i, b.At, b.Samples, b.DemandMax, s[i].At, s[i].Demand)
		}
	}
}

func TestHTMLReportOfAWeek(t *testing.T) {
	samples, res := weekOfSamples()
	var b bytes.Buffer
	if err := WriteHTML(&b, samples, res); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"<title>berth bench: berth on travis_week.csv</title>", "max_instances 300", "target_wait 15s", "50428", "uPlot"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(page, "https://") && !strings.Contains(page, "/*! https://github.com/leeoniya/uPlot") {
		t.Error("the report loads something from another site")
	}
	m := regexp.MustCompile(`const d = (\{.*\});`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no chart data in the report")
	}
	var d htmlData
	if err := json.Unmarshal([]byte(m[1]), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.T) != htmlBuckets || len(d.Hot) != htmlBuckets || d.MaxInstances != 300 {
		t.Errorf("a week in %d points (hot %d), max_instances %d; want %d buckets", len(d.T), len(d.Hot), d.MaxInstances, htmlBuckets)
	}
	if len(page) > 300<<10 {
		t.Errorf("report of a week weighs %d KB; want under 300", len(page)>>10)
	}

	// It draws in a browser, offline.
	ctx := browsertest.New(t)
	file := filepath.Join(t.TempDir(), "week.html")
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+file)); err != nil {
		t.Fatal(err)
	}
	if err := browsertest.WaitFor(ctx, "both charts", `document.querySelectorAll("canvas").length == 2`); err != nil {
		t.Fatalf("%v\n%s", err, browsertest.BodyText(ctx))
	}
}
