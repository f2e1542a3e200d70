package bench

import (
	"fmt"
	"html/template"
	"io"
	"math"

	"github.com/berth-ci/berth/console"
)

// htmlBuckets is how many points each chart of the HTML report has: a
// week in about 10-minute buckets, enough to zoom into a busy hour's shape
// and small enough to keep the file light.
const htmlBuckets = 1000

// htmlData is the report's chart data, one array per series, aligned on T
// (unix seconds). A bucket without samples is null.
type htmlData struct {
	T            []int64    `json:"t"`
	Demand       []*float64 `json:"demand"`
	DemandMax    []*float64 `json:"demand_max"`
	Hot          []*float64 `json:"hot"`
	HotMax       []*float64 `json:"hot_max"`
	Booting      []*float64 `json:"booting"`
	Suspended    []*float64 `json:"suspended"`
	Wait         []*float64 `json:"wait"`
	MaxInstances int        `json:"max_instances"`
	TargetWait   float64    `json:"target_wait"`
	BucketS      float64    `json:"bucket_s"`
}

// WriteHTML writes a self-contained HTML report of a replay: the charts of
// the console (demand, hot, booting and suspended instances with
// max_instances as a line; the longest wait per bucket with the target),
// aggregated per bucket so a week stays readable, zoomable by dragging,
// with the trace and the settings in the title and the result in a table.
// The chart library is inlined: the file opens offline.
func WriteHTML(w io.Writer, samples []Sample, res Result) error {
	if len(samples) == 0 {
		return fmt.Errorf("no samples to draw: the replay was empty")
	}
	bs := Buckets(samples, htmlBuckets)
	d := htmlData{MaxInstances: res.MaxInstances, TargetWait: res.TargetWaitS}
	if len(bs) > 1 {
		d.BucketS = bs[1].At.Sub(bs[0].At).Seconds()
	}
	for _, b := range bs {
		d.T = append(d.T, b.At.Unix())
		if b.Samples == 0 {
			d.Demand, d.DemandMax, d.Hot, d.HotMax = append(d.Demand, nil), append(d.DemandMax, nil), append(d.Hot, nil), append(d.HotMax, nil)
			d.Booting, d.Suspended, d.Wait = append(d.Booting, nil), append(d.Suspended, nil), append(d.Wait, nil)
			continue
		}
		d.Demand = append(d.Demand, num(b.Demand))
		d.DemandMax = append(d.DemandMax, num(float64(b.DemandMax)))
		d.Hot = append(d.Hot, num(b.Running))
		d.HotMax = append(d.HotMax, num(float64(b.RunningMax)))
		d.Booting = append(d.Booting, num(b.Booting))
		d.Suspended = append(d.Suspended, num(b.Suspended))
		d.Wait = append(d.Wait, num(b.MaxWait))
	}
	js, css := console.ChartLibrary()
	return htmlReport.Execute(w, map[string]any{
		"Title":  fmt.Sprintf("berth bench: %s on %s", res.Policy, traceName(res)),
		"Config": configLine(res),
		"Res":    res,
		"Rows":   resultRows(res),
		"Data":   d,
		"JS":     template.JS(js),
		"CSS":    template.CSS(css),
	})
}

func num(v float64) *float64 {
	r := math.Round(v*100) / 100
	return &r
}

func traceName(res Result) string {
	if res.Trace == "" {
		return "a trace"
	}
	return res.Trace
}

// resultRows is the report's result table.
func resultRows(res Result) [][2]string {
	return [][2]string{
		{"jobs (completed)", fmt.Sprintf("%d (%d)", res.Jobs, res.Completed)},
		{"wait p50 / p95 / p99 / max", fmt.Sprintf("%.1fs / %.1fs / %.1fs / %.1fs", res.WaitP50S, res.WaitP95S, res.WaitP99S, res.WaitMaxS)},
		{"utilization", fmt.Sprintf("%.1f%%", 100*res.Utilization)},
		{"boots / resumes", fmt.Sprintf("%d / %d", res.Boots, res.Resumes)},
		{"failed: capacity / provider", fmt.Sprintf("%d / %d", res.FailedCapacity, res.FailedProvider)},
	}
}

var htmlReport = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>{{.CSS}}
body{font:14px/1.45 system-ui,sans-serif;color:#1d2430;margin:1em 2em;max-width:1300px}
h1{font-size:18px;margin:0}.cfg{color:#5b6676;margin:.3em 0 1em}
table{border-collapse:collapse}td,th{padding:.2em .8em;border-bottom:1px solid #d9dee5;text-align:left}
.hint{color:#5b6676;font-size:12px}</style></head>
<body>
<h1 id="title">{{.Title}}</h1>
<p class="cfg" id="config">{{.Config}}</p>
<table id="result">{{range .Rows}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>{{end}}</table>
<h2>Instances and demand</h2><div id="chart-fleet"></div>
<h2>Longest wait per bucket (s)</h2><div id="chart-waits"></div>
<p class="hint">Each point aggregates one bucket (mean; dashed: peak). Drag to zoom, double-click to zoom out. Times in UTC. Charts by uPlot (MIT).</p>
<script>{{.JS}}</script>
<script>
"use strict";
const d = {{.Data}};
const width = Math.min(1280, document.body.clientWidth);
const base = {width, height: 320, scales: {x: {time: true}}, cursor: {sync: {key: "bench"}}, axes: [{}, {size: 60}], tzDate: ts => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC")};
const limit = d.t.map(() => d.max_instances);
new uPlot(Object.assign({}, base, {series: [{},
  {label: "suspended", stroke: "#1565c0", width: 1.5},
  {label: "booting", stroke: "#f9a825", width: 1.5},
  {label: "hot", stroke: "#c62828", width: 1.5},
  {label: "hot peak", stroke: "#c62828", width: 1, dash: [3, 3]},
  {label: "demand", stroke: "#000", width: 1.5},
  {label: "demand peak", stroke: "#000", width: 1, dash: [3, 3]},
  {label: "max_instances", stroke: "#7b1fa2", width: 1, dash: [8, 4]}]}),
  [d.t, d.suspended, d.booting, d.hot, d.hot_max, d.demand, d.demand_max, limit], document.getElementById("chart-fleet"));
const waitSeries = [{}, {label: "longest wait", stroke: "#2e7d32", width: 1.5}];
const waitData = [d.t, d.wait];
if (d.target_wait > 0) { waitSeries.push({label: "target", stroke: "#888", dash: [4, 3]}); waitData.push(d.t.map(() => d.target_wait)); }
new uPlot(Object.assign({}, base, {height: 220, series: waitSeries}), waitData, document.getElementById("chart-waits"));
</script>
</body></html>
`))
