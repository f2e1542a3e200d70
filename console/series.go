package console

import (
	"time"
)

// maxPoints bounds the points of a chart: a week at one point per minute
// would be 10,080, more than a screen has pixels, so wider ranges are
// aggregated into wider buckets on the server.
const maxPoints = 400

// FleetSeries is the fleet over a time range, one point per bucket. A
// bucket without samples is null (the chart leaves a gap).
type FleetSeries struct {
	// Step is the bucket width in seconds; T the buckets' starts (unix s).
	Step int64   `json:"step"`
	T    []int64 `json:"t"`
	// Avg and Max map group names (hot, booting, suspended, deleting) to
	// the mean and the peak instance count per bucket.
	Avg map[string][]*float64 `json:"avg"`
	Max map[string][]*float64 `json:"max"`
	// Util is acquired slots over usable (idle, reserved, acquired) ones.
	Util []*float64 `json:"util"`
}

// span picks the bucket width for [from, to): whole minutes, at most
// maxPoints buckets, aligned so that a refresh keeps the same buckets.
func span(from, to time.Time) (step, first, n int64) {
	f, t := from.Unix()/60, (to.Unix()+59)/60
	if t <= f {
		t = f + 1
	}
	width := max(1, (t-f+maxPoints-1)/maxPoints)
	first = f / width * width
	n = (t - first + width - 1) / width
	return width, first, n
}

// Fleet aggregates the minutes in [from, to), from no earlier than the
// history's first sample.
func (h *History) Fleet(from, to time.Time) FleetSeries {
	step, first, n := span(h.clamp(from, to), to)
	s := FleetSeries{Step: step * 60, T: make([]int64, n), Avg: map[string][]*float64{}, Max: map[string][]*float64{}, Util: make([]*float64, n)}
	for g := range numGroups {
		s.Avg[groupNames[g]] = make([]*float64, n)
		s.Max[groupNames[g]] = make([]*float64, n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for b := range n {
		start := first + b*step
		s.T[b] = start * 60
		var cnt int32
		var sum, peak [numGroups]float64
		var acq, usable float64
		for at := start; at < start+step; at++ {
			m := &h.minutes[at%minuteSlots]
			if m.at != at || m.n == 0 {
				continue
			}
			cnt += m.n
			for g := range numGroups {
				sum[g] += m.sum[g]
				peak[g] = max(peak[g], m.max[g])
			}
			acq += m.acquired
			usable += m.usable
		}
		if cnt == 0 {
			continue
		}
		for g := range numGroups {
			s.Avg[groupNames[g]][b] = ptr(round2(sum[g] / float64(cnt)))
			s.Max[groupNames[g]][b] = ptr(peak[g])
		}
		if usable > 0 {
			s.Util[b] = ptr(round2(acq / usable))
		}
	}
	return s
}

// WaitSeries is job waits per hour: percentiles from the histogram
// (accurate within 25%), the mean and the count.
type WaitSeries struct {
	T    []int64    `json:"t"`
	P50  []*float64 `json:"p50"`
	P95  []*float64 `json:"p95"`
	P99  []*float64 `json:"p99"`
	Max  []*float64 `json:"max"`
	Jobs []int      `json:"jobs"`
}

// Waits returns the hours in [from, to), at most a week, from no earlier
// than the history's first data.
func (h *History) Waits(from, to time.Time) WaitSeries {
	from = h.clamp(from, to)
	f, t := from.Unix()/3600, (to.Unix()+3599)/3600
	f = max(f, t-hourSlots+1)
	var s WaitSeries
	h.mu.Lock()
	defer h.mu.Unlock()
	for at := f; at < t; at++ {
		s.T = append(s.T, at*3600)
		w := &h.hours[at%hourSlots]
		if w.at != at || w.n == 0 {
			s.P50, s.P95, s.P99, s.Max = append(s.P50, nil), append(s.P95, nil), append(s.P99, nil), append(s.Max, nil)
			s.Jobs = append(s.Jobs, 0)
			continue
		}
		s.P50 = append(s.P50, ptr(percentile(w, 0.50)))
		s.P95 = append(s.P95, ptr(percentile(w, 0.95)))
		s.P99 = append(s.P99, ptr(percentile(w, 0.99)))
		s.Max = append(s.Max, ptr(round2(w.max)))
		s.Jobs = append(s.Jobs, w.n)
	}
	return s
}

// percentile is the q-quantile of an hour's waits: the upper edge of the
// bin that holds it, but never above the largest wait seen.
func percentile(w *hour, q float64) float64 {
	rank := uint32(q*float64(w.n) + 0.999999)
	var seen uint32
	for i, c := range w.bins {
		seen += c
		if seen >= rank && c > 0 {
			return round2(min(binUpper(i), w.max))
		}
	}
	return round2(w.max)
}

// CostSeries is instance-hours per UTC day by group. A day without a
// sample of the fleet (berth was not running) is null in every series:
// nothing is known of it, which is not zero hours.
type CostSeries struct {
	T         []int64    `json:"t"`
	Hot       []*float64 `json:"hot_h"`
	Booting   []*float64 `json:"booting_h"`
	Suspended []*float64 `json:"suspended_h"`
	// Util is the day's mean utilization (acquired over usable slots).
	Util []*float64 `json:"util"`
}

// Cost sums the minutes of the days that [from, to) touches, from the
// day of the history's first data.
func (h *History) Cost(from, to time.Time) CostSeries {
	from = h.clamp(from, to)
	day := func(t time.Time) int64 { return t.Unix() / 86400 }
	f, t := day(from), day(to)+1
	f = max(f, t-8)
	var s CostSeries
	h.mu.Lock()
	defer h.mu.Unlock()
	for d := f; d < t; d++ {
		var hours [numGroups]float64
		var acq, usable float64
		sampled := false
		for at := d * 1440; at < (d+1)*1440; at++ {
			m := &h.minutes[at%minuteSlots]
			if m.at != at || m.n == 0 {
				continue
			}
			sampled = true
			for g := range numGroups {
				hours[g] += m.sum[g] / float64(m.n) / 60
			}
			acq += m.acquired
			usable += m.usable
		}
		s.T = append(s.T, d*86400)
		var hot, booting, suspended, u *float64
		if sampled {
			hot, booting, suspended = ptr(round2(hours[groupHot])), ptr(round2(hours[groupBooting])), ptr(round2(hours[groupSuspended]))
		}
		if usable > 0 {
			u = ptr(round2(acq / usable))
		}
		s.Hot, s.Booting, s.Suspended = append(s.Hot, hot), append(s.Booting, booting), append(s.Suspended, suspended)
		s.Util = append(s.Util, u)
	}
	return s
}

func ptr(v float64) *float64 { return &v }

// round2 keeps two decimals: enough for a chart, and it keeps JSON small.
func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }
