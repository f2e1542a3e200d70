package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Cost phases: what an instance is billed as. A cloud bills an instance at
// full price from the moment it is asked for until it is gone, except while
// it is suspended (a stopped VM pays for its disk only).
const (
	CostHot       = "hot"       // ready, draining, suspending, deleting: full price, can run jobs or just did
	CostSuspended = "suspended" // suspended: a fraction of the price
	CostBooting   = "booting"   // creating, booting, resuming: full price, cannot run jobs yet
)

// costPhase maps the core's phase names (scaler.Counts.InstancesByPhase) to
// the billing phase.
var costPhase = map[string]string{
	"creating": CostBooting, "booting": CostBooting, "resuming": CostBooting,
	"ready": CostHot, "draining": CostHot, "deleting": CostHot, "suspend_wait": CostHot,
	"suspending": CostHot, "restored": CostHot,
	"suspended": CostSuspended,
}

// instanceSeconds integrates instances by billing phase over time: each
// Accrue adds the counts seen at the previous sample times the time since,
// so the counter is exact to the sampling interval (1 s in the daemon).
type instanceSeconds struct {
	mu   sync.Mutex
	vec  *prometheus.CounterVec
	last time.Time
	prev map[string]int // billing phase → instances at last
}

func newInstanceSeconds() *instanceSeconds {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_instance_seconds_total",
		Help: "Instance-seconds by billing phase (hot, suspended, booting): the fleet's cost, sampled every second.",
	}, []string{"phase"})
	for _, p := range []string{CostHot, CostSuspended, CostBooting} {
		vec.WithLabelValues(p)
	}
	return &instanceSeconds{vec: vec}
}

// Accrue records the fleet's instances by the core's phase names at now.
func (c *instanceSeconds) Accrue(byPhase map[string]int, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.last.IsZero() && now.After(c.last) {
		dt := now.Sub(c.last).Seconds()
		for p, n := range c.prev {
			if n > 0 {
				c.vec.WithLabelValues(p).Add(float64(n) * dt)
			}
		}
	}
	next := map[string]int{}
	for name, n := range byPhase {
		if p, ok := costPhase[name]; ok {
			next[p] += n
		}
	}
	c.prev, c.last = next, now
}
