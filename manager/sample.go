package manager

import (
	"context"
	"time"

	"github.com/berth-ci/berth/fleet"
)

// sampleInterval is how often the fleet's cost and the queue length are
// sampled for /metrics: the instance-seconds counter is exact to it.
const sampleInterval = time.Second

// sampleMetrics feeds the sampled metrics until fleetCtx ends: the fleet's
// instance-seconds by billing phase and the built-in queue's length.
func (m *Manager) sampleMetrics(fleetCtx context.Context, f *fleet.Fleet) {
	t := time.NewTicker(sampleInterval)
	defer t.Stop()
	for {
		m.metrics.Accrue(f.Counts().InstancesByPhase, time.Now())
		if n, err := m.queue.Len(); err == nil {
			m.metrics.QueuedJobs.WithLabelValues("queue").Set(float64(n))
		}
		select {
		case <-t.C:
		case <-fleetCtx.Done():
			return
		}
	}
}
