package console

import (
	"math"
	"sync"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/scaler"
)

// The history keeps a week at fixed cost: the fleet as per-minute
// aggregates in a ring, job waits as per-hour log histograms in a ring,
// and the last decisions, deleted instances and jobs in bounded rings.
// Nothing grows with uptime or with the number of jobs.
const (
	minuteSlots = 7*24*60 + 60 // a week of minutes and the current hour
	hourSlots   = 7*24 + 1     // a week of hours and the current one
	maxDecided  = 2000
	maxDeleted  = 500
	maxOther    = 2000 // jobs of sources other than the built-in queue
	jobsPerInst = 16
)

// group is how the console counts instances: what they cost.
type group int

const (
	groupHot       group = iota // ready or draining: running, paid in full
	groupBooting                // creating, booting, resuming: paid, not yet useful
	groupSuspended              // suspended or on its way there
	groupDeleting
	numGroups
)

var groupNames = [numGroups]string{"hot", "booting", "suspended", "deleting"}

// groupOf maps the core's phase names onto groups.
func groupOf(phase string) group {
	switch phase {
	case "ready", "draining":
		return groupHot
	case "suspend_wait", "suspending", "suspended":
		return groupSuspended
	case "deleting":
		return groupDeleting
	default: // creating, booting, resuming, restored
		return groupBooting
	}
}

// minute aggregates the samples of one minute.
type minute struct {
	at       int64 // unix minute; a slot whose at differs is empty
	n        int32
	sum      [numGroups]float64
	max      [numGroups]float64
	acquired float64 // sum of acquired slots
	usable   float64 // sum of idle + reserved + acquired slots
}

// Wait histograms have log-spaced bins: bin i holds waits up to
// waitBase·waitRatio^i, so a percentile is off by at most waitRatio.
const (
	waitBins  = 72
	waitBase  = 0.1 // seconds
	waitRatio = 1.25
)

// hour aggregates the job waits of one hour.
type hour struct {
	at   int64 // unix hour
	n    int
	sum  float64
	max  float64
	bins [waitBins]uint32
}

// Decision is one scaling decision of the core with its numbers and the
// forecast it was sized by.
type Decision struct {
	At time.Time `json:"at"`
	// Direction is "up", "in", "resume" or "suspend".
	Direction string `json:"direction"`
	InUse     int    `json:"in_use"`
	IdleSlots int    `json:"idle_target"`
	Have      int    `json:"have"`
	Want      int    `json:"want"`
	N         int    `json:"n"`
	Suspended int    `json:"suspended"`
	// SuspendedTarget is the suspended tier's target; Tier marks a decision
	// about that tier.
	SuspendedTarget int  `json:"suspended_target"`
	Tier            bool `json:"tier"`
	// Forecast is the sizing in force when the decision was taken.
	Forecast *Sizing `json:"forecast,omitempty"`
	// Instances names the instances a scale-in deleted or a suspend
	// decision suspended, and Reason why ("idle_timeout",
	// "suspended_idle_timeout"; "suspend" for the tier's suspends).
	Instances []string `json:"instances,omitempty"`
	Reason    string   `json:"reason,omitempty"`
}

// Sizing is the core's last pool sizing for target_wait.
type Sizing struct {
	At         time.Time `json:"at"`
	Hot        int       `json:"hot"`
	Suspended  int       `json:"suspended"`
	Rate       float64   `json:"rate_per_s"`
	Burst      float64   `json:"burst"`
	Source     string    `json:"source"`
	BootTime   float64   `json:"boot_time_s"`
	ResumeTime float64   `json:"resume_time_s"`
	TargetWait float64   `json:"target_wait_s"`
	Tier       bool      `json:"tier"`
}

// JobRef names a job that ran on an instance.
type JobRef struct {
	Source string `json:"source"`
	ID     string `json:"id"`
	Owner  string `json:"-"`
}

// Deleted is an instance that is gone.
type Deleted struct {
	ID       string    `json:"id"`
	At       time.Time `json:"at"`
	Reason   string    `json:"reason"`
	Lifetime float64   `json:"lifetime_s"`
	Jobs     []JobRef  `json:"jobs"`
}

// OtherJob is a job of a source other than the built-in queue (GitLab),
// which keeps its jobs itself: the console knows only what it saw run.
type OtherJob struct {
	Source   string    `json:"source"`
	ID       string    `json:"id"`
	Instance string    `json:"instance"`
	State    string    `json:"state"`
	Started  time.Time `json:"started_at"`
	Finished time.Time `json:"finished_at,omitzero"`
	Reason   string    `json:"reason,omitempty"`
}

// History records what the console charts. Its methods are safe for
// concurrent use and cheap: Observe runs under the fleet's lock.
type History struct {
	mu      sync.Mutex
	minutes []minute
	hours   []hour
	decided ring[Decision]
	deleted ring[Deleted]
	others  ring[OtherJob]
	sizing  *Sizing
	// since is the first moment the history holds data (a sample or a
	// wait): charts start there, not at an empty range start, so a fresh
	// install's 24 h chart is not a sliver at its right edge.
	since time.Time
	// naming is how many instances the last scale-in or suspend decision
	// has still to name: the core emits the decision, then one Decrease
	// or Suspend per instance.
	naming   int
	instJobs map[string][]JobRef
	version  uint64 // bumped on every change, for cheap ETags
}

// NewHistory returns an empty history.
func NewHistory() *History {
	return &History{minutes: make([]minute, minuteSlots), hours: make([]hour, hourSlots),
		decided: newRing[Decision](maxDecided), deleted: newRing[Deleted](maxDeleted),
		others: newRing[OtherJob](maxOther), instJobs: map[string][]JobRef{}}
}

// Sample adds the fleet's counts at now to the minute's aggregate.
func (h *History) Sample(now time.Time, c scaler.Counts) {
	var g [numGroups]float64
	for phase, n := range c.InstancesByPhase {
		g[groupOf(phase)] += float64(n)
	}
	acquired := float64(c.Slots[scaler.SlotAcquired])
	usable := acquired + float64(c.Slots[scaler.SlotIdle]+c.Slots[scaler.SlotReserved])
	at := now.Unix() / 60
	h.mu.Lock()
	defer h.mu.Unlock()
	h.saw(now)
	m := &h.minutes[at%minuteSlots]
	if m.at != at {
		*m = minute{at: at}
	}
	m.n++
	for i, v := range g {
		m.sum[i] += v
		m.max[i] = max(m.max[i], v)
	}
	m.acquired += acquired
	m.usable += usable
	h.version++
}

// JobStarted records that a job started on instance after waiting wait
// (negative when the source cannot say).
func (h *History) JobStarted(now time.Time, ref JobRef, instance string, wait time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.version++
	jobs := append(h.instJobs[instance], ref)
	if len(jobs) > jobsPerInst {
		jobs = jobs[len(jobs)-jobsPerInst:]
	}
	h.instJobs[instance] = jobs
	if ref.Source != "queue" {
		h.others.push(OtherJob{Source: ref.Source, ID: ref.ID, Instance: instance, State: "running", Started: now})
	}
	if wait >= 0 {
		h.addWait(now, wait)
	}
}

// addWait counts one wait in now's hour.
func (h *History) addWait(now time.Time, wait time.Duration) {
	h.saw(now)
	at := now.Unix() / 3600
	w := &h.hours[at%hourSlots]
	if w.at != at {
		*w = hour{at: at}
	}
	s := wait.Seconds()
	w.n++
	w.sum += s
	w.max = max(w.max, s)
	w.bins[waitBin(s)]++
}

// waitBin is the histogram bin of a wait of s seconds.
func waitBin(s float64) int {
	if s <= waitBase {
		return 0
	}
	i := int(math.Ceil(math.Log(s/waitBase) / math.Log(waitRatio)))
	return min(max(i, 0), waitBins-1)
}

// binUpper is the largest wait bin i holds, in seconds.
func binUpper(i int) float64 { return waitBase * math.Pow(waitRatio, float64(i)) }

// JobFinished records the end of a job of another source.
func (h *History) JobFinished(ref JobRef, now time.Time, state, reason string) {
	if ref.Source == "queue" {
		return // the queue keeps its jobs
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.version++
	h.others.update(func(j *OtherJob) bool {
		if j.Source != ref.Source || j.ID != ref.ID || j.State != "running" {
			return false
		}
		j.State, j.Finished, j.Reason = state, now, reason
		return true
	})
}

// Observe records the core's decisions and deleted instances. It runs
// under the fleet's lock and only copies numbers.
func (h *History) Observe(now time.Time, a scaler.Action) {
	switch a := a.(type) {
	case scaler.Scaled:
		h.mu.Lock()
		d := Decision{At: now, Direction: a.Direction, InUse: a.InUse, IdleSlots: a.IdleSlots, Have: a.Have,
			Want: a.Want, N: a.N, Suspended: a.Suspended, SuspendedTarget: a.SuspendedTarget, Tier: a.Tier, Forecast: h.sizing}
		h.decided.push(d)
		h.naming = 0
		if a.Direction == "in" || a.Direction == "suspend" {
			h.naming = a.N
		}
		h.version++
		h.mu.Unlock()
	case scaler.Decrease:
		h.name(a.ID, string(a.Reason))
	case scaler.Suspend:
		h.name(a.ID, "suspend")
	case scaler.Sized:
		z := &Sizing{At: now, Hot: a.Hot, Suspended: a.Suspended, Rate: a.Rate, Burst: a.Burst, Source: a.Source,
			BootTime: a.BootTime.Seconds(), ResumeTime: a.ResumeTime.Seconds(), TargetWait: a.TargetWait.Seconds(), Tier: a.Tier}
		h.mu.Lock()
		h.sizing = z
		h.version++
		h.mu.Unlock()
	case scaler.Gone:
		h.mu.Lock()
		h.deleted.push(Deleted{ID: a.ID, At: now, Reason: string(a.Reason), Lifetime: a.Lifetime.Seconds(), Jobs: h.instJobs[a.ID]})
		delete(h.instJobs, a.ID)
		h.version++
		h.mu.Unlock()
	}
}

// Version changes whenever the history does.
func (h *History) Version() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.version
}

// Backfill counts the waits of jobs that started within the last week, so
// that the waits chart survives a restart: the queue keeps its jobs, the
// history only memory.
func (h *History) Backfill(now time.Time, jobs []api.Job) {
	h.mu.Lock()
	defer h.mu.Unlock()
	weekAgo := now.Add(-7 * 24 * time.Hour)
	for _, j := range jobs {
		if j.StartedAt != nil && j.StartedAt.After(weekAgo) {
			h.addWait(*j.StartedAt, j.StartedAt.Sub(j.CreatedAt))
		}
	}
	h.version++
}

// name adds an instance to the last scale-in or suspend decision while it
// has instances left to name; a Decrease or Suspend of another cause (a
// failed instance, a parked job) comes when none are left, or before any
// decision, and names nothing.
func (h *History) name(id, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.naming == 0 {
		return
	}
	h.naming--
	h.decided.update(func(d *Decision) bool {
		d.Instances = append(d.Instances, id)
		d.Reason = reason
		return true
	})
	h.version++
}

// saw moves since back to t when t is earlier.
func (h *History) saw(t time.Time) {
	if h.since.IsZero() || t.Before(h.since) {
		h.since = t
	}
}

// clamp moves from up to the first data the history holds: a range that
// starts before it would show only empty buckets there.
func (h *History) clamp(from, to time.Time) time.Time {
	h.mu.Lock()
	since := h.since
	h.mu.Unlock()
	if !since.IsZero() && from.Before(since) && since.Before(to) {
		return since
	}
	return from
}
