package bench

import (
	"math"
	"time"
)

// Bucket aggregates the samples of one stretch of a replay for a chart: a
// week sampled every few seconds is far more points than a picture has
// pixels, and drawing every one overplots into a smear. Means show the
// level, peaks keep short spikes visible.
type Bucket struct {
	At time.Time
	// Means over the bucket's samples.
	Demand, Running, Booting, Suspended float64
	// Peaks over the bucket's samples.
	DemandMax, RunningMax, BootingMax, SuspendedMax int
	// MaxWait is the longest wait of a job that started in the bucket.
	MaxWait float64
	// Samples is how many samples the bucket holds; 0 leaves a gap.
	Samples int
}

// Buckets splits the replay's time into n equal buckets and aggregates the
// samples in each.
func Buckets(samples []Sample, n int) []Bucket {
	if len(samples) == 0 || n < 1 {
		return nil
	}
	t0, t1 := samples[0].At, samples[len(samples)-1].At
	width := max(t1.Sub(t0)/time.Duration(n), time.Nanosecond)
	if len(samples) <= n { // no more samples than buckets: one bucket each
		n, width = len(samples), 0
	}
	out := make([]Bucket, n)
	for i := range out {
		out[i].At = t0.Add(time.Duration(i) * width)
		if width == 0 { // one bucket per sample, at the sample's time
			out[i].At = samples[i].At
		}
	}
	for i, s := range samples {
		b := &out[min(i, n-1)]
		if width > 0 {
			b = &out[min(int(s.At.Sub(t0)/width), n-1)]
		}
		b.Samples++
		b.Demand += float64(s.Demand)
		b.Running += float64(s.Running)
		b.Booting += float64(s.Booting)
		b.Suspended += float64(s.Suspended)
		b.DemandMax = max(b.DemandMax, s.Demand)
		b.RunningMax = max(b.RunningMax, s.Running)
		b.BootingMax = max(b.BootingMax, s.Booting)
		b.SuspendedMax = max(b.SuspendedMax, s.Suspended)
		b.MaxWait = max(b.MaxWait, s.MaxWait)
	}
	for i := range out {
		if k := float64(out[i].Samples); k > 0 {
			out[i].Demand /= k
			out[i].Running /= k
			out[i].Booting /= k
			out[i].Suspended /= k
		}
	}
	return out
}

// niceTicks returns about n round tick values (1, 2 or 5 × 10^k apart)
// from 0 to at least top.
func niceTicks(top float64, n int) []float64 {
	if top <= 0 {
		top = 1
	}
	raw := top / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := 0.0; v < top+step; v += step {
		out = append(out, v)
		if v >= top {
			break
		}
	}
	return out
}

// timeTicks returns tick times within [t0, t1] at a round step that gives
// at most about 14 ticks, and the label layout for that step.
func timeTicks(t0, t1 time.Time) ([]time.Time, string) {
	span := t1.Sub(t0)
	steps := []struct {
		d      time.Duration
		layout string
	}{{10 * time.Minute, "15:04"}, {30 * time.Minute, "15:04"}, {time.Hour, "15:04"}, {3 * time.Hour, "Mon 15h"},
		{6 * time.Hour, "Mon 15h"}, {12 * time.Hour, "Mon 15h"}, {24 * time.Hour, "Mon 01-02"}, {48 * time.Hour, "01-02"}}
	pick := steps[len(steps)-1]
	for _, s := range steps {
		if span/s.d <= 14 {
			pick = s
			break
		}
	}
	var out []time.Time
	for t := t0.UTC().Truncate(pick.d); !t.After(t1); t = t.Add(pick.d) {
		if !t.Before(t0) {
			out = append(out, t)
		}
	}
	return out, pick.layout
}
