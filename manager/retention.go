package manager

import (
	"context"
	"time"
)

// pruneInterval is how often finished jobs and logs past job_retention and
// log_retention are deleted.
const pruneInterval = time.Hour

// prune deletes finished jobs and logs of the built-in queue past their
// retention, at start and then every pruneInterval, until ctx is done.
func (m *Manager) prune(ctx context.Context) {
	if m.cfg.JobRetention <= 0 && m.cfg.LogRetention <= 0 {
		return
	}
	t := time.NewTicker(pruneInterval)
	defer t.Stop()
	for {
		var jobsBefore, logsBefore time.Time
		now := time.Now()
		if m.cfg.JobRetention > 0 {
			jobsBefore = now.Add(-m.cfg.JobRetention)
		}
		if m.cfg.LogRetention > 0 {
			logsBefore = now.Add(-m.cfg.LogRetention)
		}
		// Under [ha] the queue is shared: the leader prunes it for all.
		if m.ha == nil || m.ha.leading.Load() {
			if _, err := m.queue.Prune(jobsBefore, logsBefore); err != nil {
				m.log.Warn("cannot prune finished jobs; trying again later", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
