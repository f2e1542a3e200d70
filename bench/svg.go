package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// svgBuckets is how many points a line of the SVG has: about one per two
// pixels of the plot, so a week reads as a curve, not a smear.
const svgBuckets = 560

// WriteSVG draws a replay's timeline as an SVG picture: demand (jobs
// arrived and not finished), hot (running) instances, suspended and booting
// instances over time in the top panel, with max_instances as a line, and
// the longest wait of the jobs that started in each interval in the bottom
// panel, with the wait target as a line. Samples are aggregated per bucket
// (the mean as a line, the peak of demand and hot instances as a faint
// line above it). It is for people: a user sees what the policy did, when
// it held capacity back and when jobs paid for it.
func WriteSVG(w io.Writer, samples []Sample, res Result) error {
	if len(samples) == 0 {
		return fmt.Errorf("no samples to draw: the replay was empty")
	}
	p := newSVGPlot(samples, res)
	var b strings.Builder
	p.header(&b, res)
	p.instances(&b, res)
	p.waits(&b, res)
	p.timeAxis(&b)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// svgPlot holds the layout and the scales of the picture.
type svgPlot struct {
	buckets      []Bucket
	t0, t1       time.Time
	span         float64
	maxN, maxW   float64
	nTicks       []float64
	wTicks       []float64
	width, left  float64
	right        float64
	topY, topH   float64
	botY, botH   float64
	height       float64
	maxInstances int
}

func newSVGPlot(samples []Sample, res Result) *svgPlot {
	p := &svgPlot{width: 1200, left: 60, right: 20, topY: 62, topH: 300, botY: 410, botH: 150, height: 610,
		buckets: Buckets(samples, svgBuckets), maxInstances: res.MaxInstances}
	p.t0, p.t1 = samples[0].At, samples[len(samples)-1].At
	p.span = max(p.t1.Sub(p.t0).Seconds(), 1)
	top, topW := float64(max(1, res.MaxInstances)), max(1, res.TargetWaitS*1.2)
	for _, b := range p.buckets {
		top = max(top, float64(b.DemandMax), float64(b.RunningMax+b.BootingMax), float64(b.SuspendedMax))
		topW = max(topW, b.MaxWait)
	}
	p.nTicks, p.wTicks = niceTicks(top, 5), niceTicks(topW, 4)
	p.maxN, p.maxW = p.nTicks[len(p.nTicks)-1], p.wTicks[len(p.wTicks)-1]
	return p
}

func (p *svgPlot) x(t time.Time) float64 {
	return p.left + (p.width-p.left-p.right)*t.Sub(p.t0).Seconds()/p.span
}
func (p *svgPlot) yTop(v float64) float64 { return p.topY + p.topH - p.topH*v/p.maxN }
func (p *svgPlot) yBot(v float64) float64 { return p.botY + p.botH - p.botH*v/p.maxW }

func (p *svgPlot) header(b *strings.Builder, res Result) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", p.width, p.height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := fmt.Sprintf("%s: p95 wait %.0fs, utilization %.1f%%, %d boots, %d resumes", res.Policy, res.WaitP95S, 100*res.Utilization, res.Boots, res.Resumes)
	fmt.Fprintf(b, `<text x="%.0f" y="18" font-size="14">%s</text>`+"\n", p.left, escape(title))
	fmt.Fprintf(b, `<text x="%.0f" y="33" fill="#555">%s</text>`+"\n", p.left, escape(configLine(res)))
}

// line draws one series as a polyline over the buckets that have samples.
func (p *svgPlot) line(b *strings.Builder, color string, width float64, opacity float64, y func(Bucket) float64) {
	var pts strings.Builder
	for _, bk := range p.buckets {
		if bk.Samples > 0 {
			fmt.Fprintf(&pts, "%.1f,%.1f ", p.x(bk.At), y(bk))
		}
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="%.1f" stroke-opacity="%.2f" points="%s"/>`+"\n", color, width, opacity, pts.String())
}

func (p *svgPlot) instances(b *strings.Builder, res Result) {
	p.valueAxis(b, p.topY, p.topH, p.nTicks, p.yTop, "")
	series := []struct {
		name, color string
		mean        func(Bucket) float64
		peak        func(Bucket) float64
	}{
		// Drawn in this order, so demand stays visible on top.
		{"suspended", "#1f77b4", func(k Bucket) float64 { return k.Suspended }, nil},
		{"booting", "#ff7f0e", func(k Bucket) float64 { return k.Booting }, nil},
		{"hot instances", "#d62728", func(k Bucket) float64 { return k.Running }, func(k Bucket) float64 { return float64(k.RunningMax) }},
		{"demand (jobs)", "#000000", func(k Bucket) float64 { return k.Demand }, func(k Bucket) float64 { return float64(k.DemandMax) }},
	}
	for i, se := range series {
		if se.peak != nil {
			p.line(b, se.color, 1, 0.3, func(k Bucket) float64 { return p.yTop(se.peak(k)) })
		}
		p.line(b, se.color, 1.5, 1, func(k Bucket) float64 { return p.yTop(se.mean(k)) })
		fmt.Fprintf(b, `<text x="%.0f" y="%.0f" fill="%s">%s</text>`+"\n", p.left+10+float64(i)*130, p.topY-10, se.color, se.name)
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" fill="#777">mean per %s; faint: peak</text>`+"\n", p.left+10+4*130, p.topY-10, bucketWidth(p))
	if res.MaxInstances > 0 {
		y := p.yTop(float64(res.MaxInstances))
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#7b1fa2" stroke-dasharray="6 3"/>`+"\n", p.left, p.width-p.right, y, y)
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" fill="#7b1fa2" text-anchor="end">max_instances %d</text>`+"\n", p.width-p.right-4, y-4, res.MaxInstances)
	}
}

func (p *svgPlot) waits(b *strings.Builder, res Result) {
	p.valueAxis(b, p.botY, p.botH, p.wTicks, p.yBot, "s")
	p.line(b, "#2ca02c", 1.5, 1, func(k Bucket) float64 { return p.yBot(k.MaxWait) })
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" fill="#2ca02c">longest wait per %s (s)</text>`+"\n", p.left+10, p.botY-10, bucketWidth(p))
	if res.TargetWaitS > 0 {
		y := p.yBot(res.TargetWaitS)
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="4 3"/>`+"\n", p.left, p.width-p.right, y, y)
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" fill="#888" text-anchor="end">target %.0fs</text>`+"\n", p.width-p.right-4, y-4, res.TargetWaitS)
	}
}

// valueAxis draws a panel's left axis with its ticks and grid lines.
func (p *svgPlot) valueAxis(b *strings.Builder, y0, h float64, ticks []float64, y func(float64) float64, unit string) {
	for _, v := range ticks {
		fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", p.left, p.width-p.right, y(v), y(v))
		fmt.Fprintf(b, `<text x="%.0f" y="%.1f" text-anchor="end">%s%s</text>`+"\n", p.left-4, y(v)+4, trimFloat(v), unit)
	}
	fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#444"/>`+"\n", p.left, p.left, y0, y0+h)
	fmt.Fprintf(b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#444"/>`+"\n", p.left, p.width-p.right, y0+h, y0+h)
}

// timeAxis draws round time ticks across both panels, labelled in UTC.
func (p *svgPlot) timeAxis(b *strings.Builder) {
	ticks, layout := timeTicks(p.t0, p.t1)
	for _, t := range ticks {
		x := p.x(t)
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#ddd"/>`+"\n", x, x, p.topY, p.topY+p.topH)
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#ddd"/>`+"\n", x, x, p.botY, p.botY+p.botH)
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#444"/>`+"\n", x, x, p.botY+p.botH, p.botY+p.botH+4)
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x, p.botY+p.botH+18, t.UTC().Format(layout))
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="end" fill="#777">UTC</text>`+"\n", p.width-p.right, p.botY+p.botH+34)
}

func bucketWidth(p *svgPlot) string {
	if len(p.buckets) < 2 {
		return "sample"
	}
	d := p.buckets[1].At.Sub(p.buckets[0].At).Round(time.Second)
	return d.String()
}

func trimFloat(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

// configLine names the trace and the settings that shaped the replay.
func configLine(res Result) string {
	s := fmt.Sprintf("trace %s · %d jobs · boot %gs · max_instances %d · capacity %d · idle_count %d · idle_time %gs",
		res.Trace, res.Jobs, res.BootTimeS, res.MaxInstances, res.CapacityPerInstance, res.IdleCount, res.IdleTimeS)
	if res.TargetWaitS > 0 {
		s += fmt.Sprintf(" · target_wait %gs", res.TargetWaitS)
	}
	if res.SuspendedIdleTimeS > 0 || res.TargetWaitS > 0 {
		s += fmt.Sprintf(" · resume %gs · suspended cost %g", res.ResumeTimeS, res.SuspendedCost)
	}
	if res.Trace == "" {
		s = strings.TrimPrefix(s, "trace  · ")
	}
	return s
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
