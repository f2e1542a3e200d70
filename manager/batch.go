package manager

import (
	"context"
	"errors"

	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/scaler"
)

// maxTakeBatch bounds how many queued jobs one step of the job loop books
// and takes: large enough that a burst of thousands costs tens of commits,
// small enough that one step never holds the fleet's lock for long.
const maxTakeBatch = 128

// batchSource is a job source whose queued jobs the job loop can book and
// take in bulk: the built-in queue.
type batchSource interface {
	jobsource.Source
	jobsource.BatchRequester
	// Len counts the queued jobs that need a new booking.
	Len() (int, error)
}

// takeBatch books a slot for each queued job (up to maxTakeBatch) with one
// save of the state, then takes that many jobs with one commit of the
// queue, gives back the bookings it did not use and starts the jobs. It
// reports whether it started any; when it did not (no capacity, a job
// resuming an environment at the head of the queue) the loop goes on one
// job at a time. The order of docs/semantics.md holds for each job: its
// booking is saved before it is taken.
//
// Before issue 23 the loop paid a state.db and a queue.db commit per job,
// one job after the other: the serial step between a burst of submits and
// all of them running.
func (m *Manager) takeBatch(ctx, jobCtx context.Context, src batchSource) bool {
	queued, err := src.Len()
	if err != nil || queued < 2 {
		return false
	}
	keys := make([]string, min(queued, maxTakeBatch))
	for i := range keys {
		keys[i] = newKey("job-")
	}
	booked, refused := m.fleet.ReserveBatch(keys)
	if refused != nil && !errors.Is(refused, scaler.ErrNoCapacity) {
		m.log.Error("reserve failed", "err", refused)
	}
	if refused != nil && booked == 0 {
		m.waiting.refused(m.log, refused)
	}
	if booked == 0 {
		return false
	}
	jobs, err := src.RequestBatch(ctx, booked)
	if err != nil && ctx.Err() == nil {
		m.log.Warn("job request failed", "source", src.Name(), "err", err)
	}
	if err := m.fleet.UnreserveBatch(keys[len(jobs):booked]); err != nil {
		m.log.Error("give back unused bookings", "err", err)
	}
	if len(jobs) == 0 {
		return false
	}
	stop := ""
	if refused != nil {
		stop = refused.Error()
	}
	m.log.Info("jobs taken in one step", "source", src.Name(), "jobs", len(jobs), "booked", booked, "queued", queued, "refused", stop)
	m.reportQueued(src)
	m.waiting.took(m.log)
	if refused != nil {
		// The rest wait for capacity, not their turn.
		m.waiting.refused(m.log, refused)
	}
	for i, job := range jobs {
		m.startJob(jobCtx, keys[i], job)
	}
	return true
}
