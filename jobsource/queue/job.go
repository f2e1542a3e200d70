package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/oneshot"
	"github.com/berth-ci/berth/jobsource"
)

// Job is a job taken from the queue by Request. It implements jobsource.Job.
type Job struct {
	q         *Queue
	key       []byte
	id        string
	spec      jobsource.Spec
	createdAt time.Time
	startedAt time.Time

	cancelOnce  sync.Once
	canceled    chan jobsource.CancelRequest
	cancelHooks oneshot.Hooks

	logSignal notifier // fired on every log write, for followers

	mu        sync.Mutex
	file      logSink
	written   int64
	logErr    error // first problem with the log file, reported in Finish
	truncated bool
	finished  bool
}

var (
	_ jobsource.Job           = (*Job)(nil)
	_ jobsource.CancelWatcher = (*Job)(nil)
)

func newJob(q *Queue, key []byte, rec *record, sc *script) *Job {
	j := &Job{
		q:         q,
		key:       key,
		id:        rec.ID,
		spec:      rec.spec(sc),
		createdAt: rec.CreatedAt,
		canceled:  make(chan jobsource.CancelRequest),
	}
	if rec.StartedAt != nil {
		j.startedAt = *rec.StartedAt
	}
	j.logSignal.init()
	f, err := q.st.openLog(rec.ID)
	if err != nil {
		// The job can still run; its log is lost and Finish says so.
		j.logErr = fmt.Errorf("open log: %w", err)
		q.log.Error("cannot open job log; the job runs without one", "job", rec.ID, "err", err)
		// A file system out of inodes fails the create with bytes free,
		// and /healthz said ok (issue 43): submits are refused until a
		// file can be created again.
		q.noteCreate(err)
		q.noteLog(j.logErr)
	} else {
		q.noteCreate(nil)
		j.file = f
	}
	return j
}

// ID is the job's ID, a decimal number unique within the queue.
func (j *Job) ID() string { return j.id }

// Spec returns what to run. Env is sorted by name.
func (j *Job) Spec() jobsource.Spec { return j.spec }

// CreatedAt is when the job was submitted.
func (j *Job) CreatedAt() time.Time { return j.createdAt }

// StartedAt is when Request handed the job out.
func (j *Job) StartedAt() time.Time { return j.startedAt }

// QueueWait is how long the job waited in the queue, for the queue-wait
// metric.
func (j *Job) QueueWait() time.Duration { return j.startedAt.Sub(j.createdAt) }

// Log returns the writer for the job's output. Writes never fail: output
// past the log limit or after a disk error is dropped, and Finish notes it in
// the job's reason, because a full log must not fail the build.
func (j *Job) Log() io.Writer { return logWriter{j} }

type logWriter struct{ j *Job }

func (w logWriter) Write(p []byte) (int, error) {
	j := w.j
	j.mu.Lock()
	wrote := false
	switch {
	case j.file == nil || j.logErr != nil:
	case j.q.maxLog > 0 && j.written+int64(len(p)) > j.q.maxLog:
		if !j.truncated {
			j.truncated = true
			room := j.q.maxLog - j.written
			if room > 0 {
				_, _ = j.file.Write(p[:room])
			}
			_, _ = fmt.Fprintf(j.file, "\n[berth] the log reached its limit of %d bytes; further output is dropped\n", j.q.maxLog)
			j.written = j.q.maxLog
			wrote = true
		}
	default:
		n, err := j.file.Write(p)
		j.written += int64(n)
		wrote = n > 0
		if err != nil {
			j.logErr = fmt.Errorf("write log: %w", err)
			j.q.log.Error("cannot write job log; further output is dropped", "job", j.id, "err", err)
			if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
				// The disk is full: /healthz must say so at once, not
				// after the next failed write to queue.db (issue 19).
				j.q.noteWrite(fmt.Errorf("the log of job %s: %w", j.id, err))
			}
		}
		// /healthz must not say ok while output is being lost.
		j.q.noteLog(j.logErr)
	}
	j.mu.Unlock()
	if wrote {
		j.logSignal.fire()
	}
	return len(p), nil
}

// Canceled is closed when someone cancels the job through the API. The
// cancel is not graceful: the received CancelRequest has Graceful false.
func (j *Job) Canceled() <-chan jobsource.CancelRequest { return j.canceled }

// AfterCancel arranges for f to run when someone cancels the job (see
// jobsource.CancelWatcher); the request it gets is not graceful.
func (j *Job) AfterCancel(f func(jobsource.CancelRequest)) (stop func() bool) {
	return j.cancelHooks.After(func() { f(jobsource.CancelRequest{}) })
}

func (j *Job) cancel() {
	j.cancelOnce.Do(func() {
		close(j.canceled)
		j.cancelHooks.Fire()
	})
}

// Started records the instance the job runs on, so `berth jobs` shows it
// while the job runs.
func (j *Job) Started(instance string) {
	err := j.q.leaderBatch(func(tx tx) error {
		rec, err := loadRecord(tx, j.key)
		if err != nil || rec == nil || rec.State != api.JobRunning {
			return err
		}
		rec.Instance = instance
		return saveRecord(tx, j.key, rec)
	})
	if err != nil {
		// Only the display suffers; Finish records the instance again.
		j.q.log.Warn("cannot record the job's instance", "job", j.id, "instance", instance, "err", err)
		return
	}
	j.q.changed.fire()
}

// Finish records how the job ended and closes its log. It may be retried
// after an error; once it succeeded, further calls return ErrFinished.
//
// The state follows r.Failure: none → success, canceled → canceled,
// anything else → failed. r.ExitCode is kept only when >= 0.
func (j *Job) Finish(ctx context.Context, r jobsource.Result) error {
	j.mu.Lock()
	if j.finished {
		j.mu.Unlock()
		return fmt.Errorf("finish job %s: %w", j.id, ErrFinished)
	}
	j.mu.Unlock()
	// Close the log before the state turns final: a follower that sees the
	// final state then reads a complete log. Output etcd could not take
	// yet is held, like the result: Finish fails and is tried again
	// (issue 32: a job that exited 0 was recorded failed for a dropped
	// chunk).
	if err := j.closeLog(); err != nil {
		return fmt.Errorf("finish job %s: %w", j.id, j.q.storeError("write the rest of the job's log (held until etcd takes it)", err))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("finish job %s: %w", j.id, err)
	}
	j.mu.Lock()
	logNote := ""
	if j.logErr != nil {
		logNote = fmt.Sprintf(" (the log is incomplete: %v)", j.logErr)
		// A job whose output was lost did not succeed as far as anyone
		// can tell: fail it, loudly, rather than report success with
		// output silently missing.
		if r.Failure == jobsource.FailureNone && r.ExitCode <= 0 {
			r.Failure = jobsource.FailureSystem
			r.Message = "the script succeeded, but berth could not store its output; free space on the disk of berth's state dir and run the job again"
			if _, ok := j.q.st.(*etcdBackend); ok {
				r.Message = "the script succeeded, but berth could not store its output in etcd; check the etcd cluster (etcdctl endpoint health, alarm list) and run the job again"
			}
		}
	}
	j.mu.Unlock()

	now := time.Now().UTC()
	var final *record
	err := j.q.leaderUpdate(func(tx tx) error {
		final = nil
		rec, err := loadRecord(tx, j.key)
		if err != nil {
			return err
		}
		if rec == nil {
			return fmt.Errorf("job %s: %w", j.id, ErrNotFound)
		}
		if rec.State.Done() {
			return fmt.Errorf("job %s ended as %s: %w", j.id, rec.State, ErrFinished)
		}
		applyResult(rec, r, now)
		rec.Reason += logNote
		if err := saveRecord(tx, j.key, rec); err != nil {
			return err
		}
		if err := recordEnvOwner(tx, rec); err != nil {
			return err
		}
		final = rec
		return tx.del(bucketRunning, j.key)
	})
	if err != nil {
		if errors.Is(err, ErrFinished) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrFenced) || errors.Is(err, ErrNotLeader) {
			return fmt.Errorf("finish job %s: %w", j.id, err)
		}
		return fmt.Errorf("finish job %s: %w", j.id, j.q.storeError("record the result", err))
	}
	j.mu.Lock()
	j.finished = true
	j.mu.Unlock()
	j.q.mu.Lock()
	delete(j.q.live, j.id)
	j.q.mu.Unlock()
	j.q.log.Info("job finished", "job", j.id, "state", final.State, "failure", final.Failure,
		"exit_code", r.ExitCode, "instance", final.Instance, "reason", final.Reason)
	j.q.changed.fire()
	j.logSignal.fire()
	return nil
}

func applyResult(rec *record, r jobsource.Result, now time.Time) {
	failure := r.Failure
	if failure == jobsource.FailureNone && r.ExitCode > 0 {
		// A result that contradicts itself is safer read as a failure.
		failure = jobsource.FailureScript
	}
	switch failure {
	case jobsource.FailureNone:
		rec.State = api.JobSuccess
	case jobsource.FailureCanceled:
		rec.State = api.JobCanceled
	default:
		rec.State = api.JobFailed
	}
	rec.Failure = string(failure)
	if r.ExitCode >= 0 {
		code := r.ExitCode
		rec.ExitCode = &code
	}
	rec.Reason = r.Message
	if rec.Reason == "" && failure == jobsource.FailureScript && r.ExitCode > 0 {
		rec.Reason = fmt.Sprintf("the script exited with code %d", r.ExitCode)
	}
	if r.Instance != "" {
		rec.Instance = r.Instance
	}
	rec.EnvKey = r.EnvKey
	rec.FinishedAt = &now
}

// closeLog flushes the log to its store and stops further writes. A log
// in etcd that could not be written yet keeps its output and returns the
// error, so that Finish is tried again (the fence refusing it is final);
// a log file's failure is recorded in logErr.
func (j *Job) closeLog() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.file == nil {
		return nil
	}
	err := j.file.Close()
	if _, held := j.file.(*etcdLog); held && err != nil && j.logErr == nil && !errors.Is(err, ErrFenced) && !errors.Is(err, ErrNotLeader) {
		return err
	}
	if err != nil && j.logErr == nil {
		j.logErr = err
	}
	j.file = nil
	return nil
}
