package queue

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// A file system can run out of inodes with bytes free: queue.db's writes
// then work, /healthz said ok and every submit was accepted, and each job
// started failed after running because its log file could not be created
// (issue 43). The queue tracks whether files can be created in the log
// directory apart from whether queue.db can be written, refuses submits
// (507) while they cannot, and probes for it before a job finds out.

// noSpace says whether err means a file system (or a quota) is full.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// noteCreate records the outcome of creating a file in the log directory
// (a job's log, a probe): a no-space failure is kept until a create works
// again; other outcomes say nothing about room.
func (q *Queue) noteCreate(err error) {
	h := &q.health
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		h.createErr = nil
	case !noSpace(err):
	case h.createErr == nil:
		h.createErr, h.createSince = err, time.Now()
	default:
		h.createErr = err
	}
}

// checkLogRoom creates a file in the log directory when it may be unable
// to take one (a create failed before, or the file system says no inode is
// free) and records the outcome; it returns the failure of that create.
// It costs one statfs while creates work, so submits can call it.
func (q *Queue) checkLogRoom() error {
	if q.logDir == "" {
		return nil // logs live in etcd
	}
	h := &q.health
	h.mu.Lock()
	failing := h.createErr != nil
	h.mu.Unlock()
	if !failing && !outOfInodes(q.logDir) {
		return nil
	}
	err := probeDir(q.logDir)
	q.noteCreate(err)
	return err
}

// roomForJob refuses a submit while no job log can be created: the job
// would run and fail for its output. The error wraps ErrNoSpace (507).
func (q *Queue) roomForJob() error {
	err := q.checkLogRoom()
	if !noSpace(err) {
		return nil
	}
	return fmt.Errorf("queue the job: %w: no file can be created in %s (%v): the file system is out of inodes or space; delete files there, then retry; nothing was changed",
		ErrNoSpace, q.logDir, err)
}

// createProblem says why job logs cannot be created, for Health; nil
// while they can. Called with h.mu held.
func (q *Queue) createProblem() error {
	h := &q.health
	if h.createErr == nil {
		return nil
	}
	return fmt.Errorf("no file can be created in %s since %s: %w (the file system is out of inodes or space); submits are refused with 507 until one can: delete files there or grow the file system (no restart needed)",
		q.logDir, h.createSince.UTC().Format(time.RFC3339), h.createErr)
}
