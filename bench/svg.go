package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteSVG draws a replay's timeline as an SVG picture: demand (jobs
// arrived and not finished), hot (running) instances, suspended and booting
// instances over time in the top panel, and the longest wait of the jobs
// that started in each sample interval in the bottom panel, with the wait
// target as a line. It is for people: a user sees what the policy did, when
// it held capacity back and when jobs paid for it.
func WriteSVG(w io.Writer, samples []Sample, res Result) error {
	const (
		width, left, right = 1200.0, 60.0, 20.0
		topY, topH         = 40.0, 300.0
		botY, botH         = 390.0, 150.0
		height             = 580.0
	)
	if len(samples) == 0 {
		return fmt.Errorf("no samples to draw: the replay was empty")
	}
	t0, t1 := samples[0].At, samples[len(samples)-1].At
	span := t1.Sub(t0).Seconds()
	if span <= 0 {
		span = 1
	}
	maxN, maxW := 1, 1.0
	for _, s := range samples {
		maxN = max(maxN, s.Demand, s.Running+s.Booting, s.Suspended)
		maxW = max(maxW, s.MaxWait)
	}
	maxW = max(maxW, res.TargetWaitS*1.2)
	x := func(t time.Time) float64 { return left + (width-left-right)*t.Sub(t0).Seconds()/span }
	yTop := func(n int) float64 { return topY + topH - topH*float64(n)/float64(maxN) }
	yBot := func(v float64) float64 { return botY + botH - botH*v/maxW }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	title := fmt.Sprintf("%s: p95 wait %.0fs, utilization %.1f%%, %d boots, %d resumes", res.Policy, res.WaitP95S, 100*res.Utilization, res.Boots, res.Resumes)
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14">%s</text>`+"\n", left, escape(title))
	series := []struct {
		name, color string
		v           func(Sample) int
	}{
		// Drawn in this order, so demand stays visible on top.
		{"suspended", "#1f77b4", func(s Sample) int { return s.Suspended }},
		{"booting", "#ff7f0e", func(s Sample) int { return s.Booting }},
		{"hot instances", "#d62728", func(s Sample) int { return s.Running }},
		{"demand (jobs)", "#000000", func(s Sample) int { return s.Demand }},
	}
	for i, se := range series {
		var pts strings.Builder
		for _, s := range samples {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(s.At), yTop(se.v(s)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1" points="%s"/>`+"\n", se.color, pts.String())
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="%s">%s</text>`+"\n", left+10+float64(i)*140, topY-6, se.color, se.name)
	}
	var pts strings.Builder
	for _, s := range samples {
		fmt.Fprintf(&pts, "%.1f,%.1f ", x(s.At), yBot(s.MaxWait))
	}
	fmt.Fprintf(&b, `<polyline fill="none" stroke="#2ca02c" stroke-width="1" points="%s"/>`+"\n", pts.String())
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="#2ca02c">longest wait per interval (s)</text>`+"\n", left+10, botY-6)
	if res.TargetWaitS > 0 {
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="4 3"/>`+"\n", left, width-right, yBot(res.TargetWaitS), yBot(res.TargetWaitS))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" fill="#888">target %.0fs</text>`+"\n", width-right-80, yBot(res.TargetWaitS)-4, res.TargetWaitS)
	}
	// Axes: counts and seconds on the left, one tick per day at the bottom.
	for _, ax := range []struct {
		y0, h float64
		top   string
	}{{topY, topH, fmt.Sprint(maxN)}, {botY, botH, fmt.Sprintf("%.0fs", maxW)}} {
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#444"/>`+"\n", left, left, ax.y0, ax.y0+ax.h)
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#444"/>`+"\n", left, width-right, ax.y0+ax.h, ax.y0+ax.h)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">%s</text>`+"\n", left-4, ax.y0+10, ax.top)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end">0</text>`+"\n", left-4, ax.y0+ax.h)
	}
	step := 24 * time.Hour
	if t1.Sub(t0) < 2*24*time.Hour {
		step = time.Hour
	}
	for t := t0.Truncate(step).Add(step); !t.After(t1); t = t.Add(step) {
		label := t.UTC().Format("Mon")
		if step < 24*time.Hour {
			label = t.UTC().Format("15:04")
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#ddd"/>`+"\n", x(t), x(t), topY, botY+botH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x(t), botY+botH+16, label)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
