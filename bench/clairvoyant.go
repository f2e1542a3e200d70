package bench

import (
	"container/heap"
	"time"
)

// The clairvoyant reference: how far a policy is from the physical limit.
// A schedule that knows every job in advance starts each one on arrival
// (zero wait) on the instance freed last, or on one it booted a boot time
// ahead. Each idle gap between two jobs on an instance is priced hot,
// suspended (suspend and resume billed in full, the rest at the suspended
// cost) or deleted and rebooted, whichever is cheapest; an instance whose
// last job ended is deleted at once. No online policy waits less, and none
// is expected to spend less: berth's utilization over this one says how
// much of the limit it reaches, on the trace's own terms.

// Clairvoyant is the reference schedule's cost, priced as the replay is
// (Result's fields of the same names).
type Clairvoyant struct {
	InstanceSeconds          float64
	SuspendedInstanceSeconds float64
	Utilization              float64
	// Boots counts instances booted, reboots of a gap included; Resumes
	// counts gaps spent suspended.
	Boots   int
	Resumes int
}

// ClairvoyantSchedule prices the reference schedule of jobs (sorted by
// arrival) under c's boot, suspend and resume times and suspended cost.
// With more than one slot per instance it schedules slots and prices each
// as 1/CapacityPerInstance of an instance: a bound that whole instances,
// which share their gaps, cannot beat.
func ClairvoyantSchedule(jobs []Job, c Config) Clairvoyant {
	c.setDefaults()
	boot, s := c.BootTime.Seconds(), c.SuspendedCost
	suspend, resume := c.SuspendTime.Seconds(), c.ResumeTime.Seconds()
	var (
		out         Clairvoyant
		running     timeHeap    // end times of the jobs on instances
		free        []time.Time // when each idle instance was freed, the latest last
		hot, susp   float64     // instance-seconds billed, and of those suspended
		busy, boots float64
	)
	for _, j := range jobs {
		for running.Len() > 0 && !running[0].After(j.Arrival) {
			free = append(free, heap.Pop(&running).(time.Time))
		}
		if n := len(free); n == 0 {
			hot += boot
			boots++
		} else {
			gap := j.Arrival.Sub(free[n-1]).Seconds()
			free = free[:n-1]
			switch cost, kind := gapCost(gap, boot, suspend, resume, s); kind {
			case gapHot:
				hot += cost
			case gapSuspended:
				hot += suspend + resume
				susp += gap - suspend - resume
				out.Resumes++
			case gapReboot:
				hot += cost
				boots++
			}
		}
		hot += j.Duration.Seconds()
		busy += j.Duration.Seconds()
		heap.Push(&running, j.Arrival.Add(j.Duration))
	}
	k := float64(c.CapacityPerInstance)
	out.InstanceSeconds = (hot + susp) / k
	out.SuspendedInstanceSeconds = susp / k
	out.Boots = int((boots + k - 1) / k)
	if cost := hot + s*susp; cost > 0 {
		out.Utilization = busy / cost
	}
	return out
}

// What an idle gap is spent as.
const (
	gapHot = iota
	gapSuspended
	gapReboot
)

// gapCost is the cheapest way to bridge an idle gap of an instance (all in
// seconds, cost in running instance-seconds): stay hot, suspend and resume
// just in time (when the gap holds both), or delete it and boot another
// one boot ahead of the next job. Ties go to the fewest provider calls.
func gapCost(gap, boot, suspend, resume, s float64) (float64, int) {
	cost, kind := gap, gapHot
	if gap >= suspend+resume {
		if c := suspend + resume + s*(gap-suspend-resume); c < cost {
			cost, kind = c, gapSuspended
		}
	}
	if boot < cost {
		cost, kind = boot, gapReboot
	}
	return cost, kind
}

// timeHeap is a min-heap of times.
type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
