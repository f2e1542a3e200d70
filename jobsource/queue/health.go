package queue

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/berth-ci/berth/api"
)

// How often Health writes a probe to queue.db: rarely while writes work, so
// that monitoring costs nothing, and often while they fail, so that /healthz
// turns healthy soon after the disk has room again.
const (
	probeIntervalOK      = 30 * time.Second
	probeIntervalFailing = 5 * time.Second
)

var keyHealthProbe = []byte("health_probe")

// writeHealth remembers whether the queue's last write worked.
type writeHealth struct {
	mu       sync.Mutex
	err      error     // the last write failure; nil once a write worked again
	since    time.Time // when writes started to fail
	probedAt time.Time
	// logErr is the last failure to write a job's log, nil once a log
	// write worked again; logSince is when it started.
	logErr   error
	logSince time.Time
	logLast  time.Time // the latest failed log write
	// createErr is why no file could be created in the log directory
	// lately (no inode or byte free), nil once a create worked again;
	// createSince is when it started (logroom.go).
	createErr   error
	createSince time.Time
	probing     bool
}

// update is db.Update that keeps writeHealth current. Errors that say the
// request was wrong (a job not found or already finished) say nothing
// about the disk.
func (q *Queue) update(fn func(tx) error) error { return q.write(writeAny, fn) }

// leaderUpdate is update for writes only the leader may make (taking,
// starting and finishing jobs): under HA they prove the leader's fence.
func (q *Queue) leaderUpdate(fn func(tx) error) error { return q.write(writeLeader, fn) }

// leaderBatch is batch for writes only the leader may make.
func (q *Queue) leaderBatch(fn func(tx) error) error { return q.write(writeLeaderBatch, fn) }

func (q *Queue) write(kind writeKind, fn func(tx) error) error {
	err := q.st.update(kind, fn)
	var re *RequestError
	if err == nil || !(errors.Is(err, ErrNotFound) || errors.Is(err, ErrFinished) || errors.As(err, &re) ||
		errors.Is(err, ErrFenced) || errors.Is(err, ErrNotLeader)) {
		q.noteWrite(err)
	}
	return err
}

// batch is update for callers that arrive together (submits from many
// clients, jobs starting at once): bbolt commits concurrent batch calls in
// one transaction, so a burst of 1,000 submits costs tens of fsyncs instead
// of 1,000 in a row. fn may run twice (again alone when the shared
// transaction fails), so it must set everything it computes.
func (q *Queue) batch(fn func(tx) error) error { return q.write(writeBatch, fn) }

func (q *Queue) noteWrite(err error) {
	h := &q.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		h.err = nil
		return
	}
	if h.err == nil {
		h.since = time.Now()
	}
	h.err = err
}

// noteLog records the outcome of a job log write: output lost to a full
// disk must show in /healthz, not only in the job's reason.
func (q *Queue) noteLog(err error) {
	h := &q.health
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		h.logErr = nil
	case h.logErr == nil:
		h.logErr, h.logSince = err, time.Now()
	}
	if err != nil {
		h.logLast = time.Now()
	}
}

// noteLogProbe clears a lost-log failure once a probe write to the log
// directory worked and no job's log write has failed for a probe interval:
// a job still losing output keeps /healthz degraded.
func (q *Queue) noteLogProbe(err error) {
	h := &q.health
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil && time.Since(h.logLast) >= probeIntervalFailing {
		h.logErr = nil
	}
}

// Health returns nil when the queue can store jobs, else an error that
// says why not and what to do (berth's /healthz reports it). Besides the
// outcome of the last real write it writes a probe now and then: as big as
// the largest job request while writes fail, so it passes only when a
// submit would.
func (q *Queue) Health() error {
	if q.isClosed() {
		return fmt.Errorf("the queue is closed: %w", ErrClosed)
	}
	h := &q.health
	h.mu.Lock()
	interval := probeIntervalOK
	if h.err != nil || h.logErr != nil || h.createErr != nil {
		interval = probeIntervalFailing
	}
	probe := !h.probing && time.Since(h.probedAt) >= interval
	size := 64
	if h.err != nil {
		size = api.MaxRequestBytes
	}
	if probe {
		h.probing, h.probedAt = true, time.Now()
	}
	h.mu.Unlock()

	if probe {
		run := func() {
			q.noteWrite(q.st.probe(size))
			// A file created in the log directory: a file system out of
			// inodes takes queue.db's writes and fails every job's log
			// (issue 43). It also clears a lost log line, which only a
			// job's next log write would clear otherwise.
			lerr := q.st.probeLogs()
			q.noteCreate(lerr)
			q.noteLogProbe(lerr)
			h.mu.Lock()
			h.probing = false
			h.mu.Unlock()
		}
		if _, remote := q.st.(*etcdBackend); remote {
			// etcd gone makes a probe wait its whole timeout (5 s), and
			// /healthz must answer within a second whatever etcd does
			// (issue 43): the answer is the last known state, the probe's
			// outcome shows at the next call.
			go run()
		} else {
			run()
		}
	}

	// One statfs: no free inode is noticed before a job fails for it.
	q.checkLogRoom()

	h.mu.Lock()
	defer h.mu.Unlock()
	if cerr := q.createProblem(); h.err == nil && cerr != nil {
		return cerr
	}
	if h.err == nil && h.logErr != nil {
		return fmt.Errorf("job output cannot be written to %s since %s: %w; jobs whose output is lost fail: %s",
			q.logWhere(), h.logSince.UTC().Format(time.RFC3339), h.logErr, q.st.remedy(h.logErr))
	}
	if h.err == nil {
		return nil
	}
	return fmt.Errorf("the queue cannot write %s since %s: %w; submits fail until it can: %s",
		q.st.where(), h.since.UTC().Format(time.RFC3339), h.err, q.st.remedy(h.err))
}

// probeDir writes and removes a small file in dir: nil when a job's log
// could be written there now.
func probeDir(dir string) error {
	f, err := os.CreateTemp(dir, ".health-probe-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(make([]byte, 4096))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// logWhere names where job logs are written, for messages.
func (q *Queue) logWhere() string {
	if q.logDir != "" {
		return q.logDir
	}
	return q.st.where()
}
