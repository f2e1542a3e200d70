// Package queue is berth's built-in job source: a FIFO queue of jobs
// submitted over HTTP (`berth submit`), stored in a bbolt file so that jobs
// and their results survive restarts, with each job's log in its own file.
//
// Layout under the directory given to Open:
//
//	queue.db        bbolt: jobs, plus indexes of queued and running jobs
//	logs/ID.log     the job's combined output, appended as it runs
//
// Env values are stored in queue.db as given (often secrets); the file is
// created 0600 and the directory 0700 for that reason.
//
// With [ha] the same queue lives in etcd instead (OpenEtcd, etcd.go), shared
// by the managers of a fleet; storage.go is the seam between the queue's
// rules and the two stores.
//
// A Queue implements jobsource.Source and jobsource.Waiter; the jobs it hands
// out implement jobsource.Job. Its HTTP API (see Handler) is the job half of
// the API in docs/config.md.
package queue

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/boltfile"
	"github.com/berth-ci/berth/jobsource"
)

// RestartReason is the reason recorded for jobs that were running when berth
// stopped without finishing them; Open marks them failed with it.
const RestartReason = "berth restarted while the job ran"

// Errors callers branch on with errors.Is.
var (
	// ErrNotFound: no job has that ID.
	ErrNotFound = errors.New("job not found")
	// ErrFinished: the job already ended, so it cannot be canceled or finished again.
	ErrFinished = errors.New("job already finished")
	// ErrClosed: the queue was closed.
	ErrClosed = errors.New("queue closed")
	// ErrNoSpace: the job could not be stored because the disk (or the
	// database's size limit) is full. The job was not queued.
	ErrNoSpace = errors.New("no space left for the queue database")
	// ErrWrite: queue.db could not be written for another reason (an I/O
	// error). Like ErrNoSpace it may pass: the caller may retry.
	ErrWrite = errors.New("cannot write the queue database")
)

// DefaultMaxLogBytes bounds one job's log. Output past it is dropped with a
// note, so a script stuck printing in a loop cannot fill the disk.
const DefaultMaxLogBytes = 100 << 20

var (
	bucketJobs    = []byte("jobs")
	bucketScripts = []byte("scripts")
	bucketQueued  = []byte("queued")
	bucketRunning = []byte("running")
	bucketMeta    = []byte("meta")
	keyVersion    = []byte("version")
)

const schemaVersion = 1

// Option configures Open.
type Option func(*options)

type options struct {
	logger      *slog.Logger
	maxLogBytes int64
	maxDBSize   int
	resumeCheck ResumeCheck
	waitReason  WaitReason
	idFloorFile string
}

// WithLogger sets where the queue logs; the default is slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithMaxLogBytes bounds each job's log (default DefaultMaxLogBytes; <= 0
// means no limit).
func WithMaxLogBytes(n int64) Option { return func(o *options) { o.maxLogBytes = n } }

// WithMaxDBSize bounds queue.db in bytes; a submit that would grow it past
// the bound fails with ErrNoSpace instead of filling the disk. 0 (default)
// means no bound.
func WithMaxDBSize(n int) Option { return func(o *options) { o.maxDBSize = n } }

// Queue is the built-in job queue. It is safe for concurrent use.
type Queue struct {
	dir         string
	logDir      string
	st          backend
	fence       Fence // nil for bbolt: one berth, no fence
	log         *slog.Logger
	maxLog      int64
	resumeCheck ResumeCheck
	waitReason  WaitReason
	health      writeHealth
	changed     notifier // fired on every job state change
	done        chan struct{}

	idMu     sync.Mutex // guards lastID, issuedID and lastIDFile (ids.go)
	lastID   uint64     // the ID in lastIDFile
	issuedID uint64     // the highest ID issued, maybe not yet in lastIDFile

	takeoverMu sync.Mutex // one TakeOver at a time (takeover.go)

	mu          sync.Mutex
	tookOver    int64           // the fence revision of the last TakeOver
	live        map[string]*Job // running jobs handed out by this process
	closed      bool
	interrupted []api.Job
	// keptMu guards kept, the copy of queue.db.bak made for jobs set
	// aside since this start (quarantine.go).
	keptMu sync.Mutex
	kept   string
}

// Open opens (creating if needed) the queue stored in dir. Jobs a previous
// berth left running cannot still be running (their executor died with it),
// so Open marks them failed with RestartReason; Interrupted lists them.
// Queued jobs stay queued, in order.
func Open(dir string, opts ...Option) (*Queue, error) {
	o := options{logger: slog.Default(), maxLogBytes: DefaultMaxLogBytes}
	for _, opt := range opts {
		opt(&o)
	}
	logDir := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logDir, 0o700); err != nil {
		return nil, fmt.Errorf("open queue %s: create log directory: %w", dir, err)
	}
	path := filepath.Join(dir, "queue.db")
	damaged, err := checkFile(path)
	if err != nil {
		return nil, err
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second, MaxSize: o.maxDBSize})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("open queue %s: the database is locked by another process: is another `berth run` using the same state_dir?", path)
		}
		return nil, fmt.Errorf("open queue %s: %w", path, err)
	}
	q := newQueue(o)
	q.dir, q.logDir = dir, logDir
	sweepTemps(dir, logDir, q.log) // quarantine.go
	q.st = &boltBackend{q: q, dir: dir, logDir: logDir, db: db, backer: boltfile.NewBacker(db, path, CheckRecord)}
	if err := q.recover(damaged > 0); err != nil {
		db.Close()
		return nil, fmt.Errorf("open queue %s: %w", path, err)
	}
	// The file passed its check: keep it as the last good copy, unless
	// records were quarantined: the copy may hold them undamaged.
	if damaged == 0 {
		if err := q.Backup(); err != nil {
			db.Close()
			return nil, err
		}
	}
	for _, j := range q.interrupted {
		q.appendNote(j.ID, RestartReason)
		q.log.Warn("job failed: "+RestartReason, "job", j.ID, "instance", j.Instance)
	}
	return q, nil
}

// newQueue makes a queue without its store.
func newQueue(o options) *Queue {
	q := &Queue{
		log:         o.logger.With("component", "queue"),
		maxLog:      o.maxLogBytes,
		resumeCheck: o.resumeCheck,
		waitReason:  o.waitReason,
		done:        make(chan struct{}),
		live:        map[string]*Job{},
	}
	q.changed.init()
	return q
}

// recover creates the buckets, sets damaged jobs aside when the check found
// some, and fails jobs left running.
func (q *Queue) recover(damaged bool) error {
	now := time.Now().UTC()
	db := q.st.(*boltBackend).db
	return db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if v := meta.Get(keyVersion); v != nil {
			if n, _ := strconv.Atoi(string(v)); n > schemaVersion {
				return fmt.Errorf("written by a newer berth (schema %d, this berth knows %d): upgrade berth or use another state_dir", n, schemaVersion)
			}
		} else if err := meta.Put(keyVersion, []byte(strconv.Itoa(schemaVersion))); err != nil {
			return err
		}
		for _, b := range [][]byte{bucketJobs, bucketScripts, bucketQueued, bucketRunning} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		// New IDs start above every ID this directory has issued, even if
		// queue.db was restored from an older copy or replaced.
		q.lastID = q.idFloor()
		if jobs := tx.Bucket(bucketJobs); jobs.Sequence() < q.lastID {
			q.log.Warn("queue.db counts job IDs from below IDs already issued (restored or replaced?); new jobs continue above them", "db_sequence", jobs.Sequence(), "last_issued", q.lastID)
			if err := jobs.SetSequence(q.lastID); err != nil {
				return err
			}
		}
		if damaged {
			kept := q.keepGoodCopy()
			bad, err := quarantineDamaged(boltTx{tx}, kept)
			if err != nil {
				return err
			}
			for id, why := range bad {
				q.log.Error("job set aside (quarantined): "+why+"; the other jobs go on; its last good copy is kept (berth jobs quarantined, berth state restore-job)", "job", id, "kept", kept)
			}
		}
		failed, err := failRunning(boltTx{tx}, nil, RestartReason, now)
		q.interrupted = append(q.interrupted, failed...)
		return err
	})
}

// failRunning marks every job in the running index failed with reason,
// except those skip says to keep (jobs this process still runs), and
// drops them from the index. It returns the jobs it failed.
func failRunning(tx tx, skip func(id string) bool, reason string, now time.Time) ([]api.Job, error) {
	var keys [][]byte
	if err := tx.scan(bucketRunning, false, func(k, _ []byte) (bool, error) {
		keys = append(keys, append([]byte(nil), k...))
		return true, nil
	}); err != nil {
		return nil, err
	}
	var failed []api.Job
	for _, k := range keys {
		if skip != nil && skip(jobID(k)) {
			continue
		}
		rec, err := loadRecord(tx, k)
		if err != nil {
			return nil, err
		}
		if rec != nil && rec.State == api.JobRunning {
			rec.State = api.JobFailed
			rec.Failure = string(jobsource.FailureSystem)
			rec.Reason = reason
			rec.FinishedAt = &now
			if err := saveRecord(tx, k, rec); err != nil {
				return nil, err
			}
			failed = append(failed, rec.apiJob(nil))
		}
		if err := tx.del(bucketRunning, k); err != nil {
			return nil, err
		}
	}
	return failed, nil
}

// Interrupted returns the jobs Open marked failed because the previous berth
// stopped while they ran, so the manager can report them.
func (q *Queue) Interrupted() []api.Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]api.Job(nil), q.interrupted...)
}

// Name identifies the source in logs and metrics.
func (q *Queue) Name() string { return "queue" }

// Close closes the database. Jobs still running cannot be finished
// afterwards; the next Open marks them failed.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	live := q.live
	q.live = map[string]*Job{}
	q.mu.Unlock()
	close(q.done)
	q.changed.fire()
	for _, j := range live {
		j.closeLog()
	}
	berr := q.Backup()
	if err := q.st.close(); err != nil {
		return fmt.Errorf("close queue %s: %w", q.st.where(), err)
	}
	return berr
}

// Submit validates req and queues it. A *RequestError means the request is
// wrong; ErrNoSpace (wrapped) means the disk is full. Either way nothing was
// queued.
func (q *Queue) Submit(req api.JobRequest) (api.Job, error) {
	return q.SubmitAs(api.Principal{Name: api.AdminName, Admin: true}, req)
}

// SubmitAs is Submit on behalf of p, who then owns the job. A resume key
// that p may not use (see WithResumeCheck and api.Principal) is refused
// with a *RequestError and nothing is queued.
func (q *Queue) SubmitAs(p api.Principal, req api.JobRequest) (api.Job, error) {
	spec, err := Validate(req)
	if err != nil {
		return api.Job{}, err
	}
	job, _, err := q.submit(p, req, spec, "")
	return job, err
}

// SubmitOnce is SubmitAs with an idempotency key (idem.go): when p already
// submitted with key, it returns that job and true, and queues nothing.
func (q *Queue) SubmitOnce(p api.Principal, req api.JobRequest, key string) (api.Job, bool, error) {
	spec, err := Validate(req)
	if err != nil {
		return api.Job{}, false, err
	}
	return q.submit(p, req, spec, key)
}

func (q *Queue) submit(p api.Principal, req api.JobRequest, spec jobsource.Spec, key string) (api.Job, bool, error) {
	if err := q.checkResume(p, spec.ResumeKey); err != nil {
		return api.Job{}, false, err
	}
	if err := checkIdemKey(key); err != nil {
		return api.Job{}, false, err
	}
	if err := q.roomForJob(); err != nil {
		return api.Job{}, false, err
	}
	owner := p.Name
	if p.Admin {
		owner = ""
	}
	rec := &record{
		Owner:     owner,
		State:     api.JobQueued,
		Timeout:   spec.Timeout,
		Suspend:   req.Suspend,
		Resume:    req.Resume,
		CreatedAt: time.Now().UTC(),
		IdemKey:   string(idemEntry(p.Name, key)),
	}
	var existing string
	for k := range req.Env {
		rec.EnvNames = append(rec.EnvNames, k)
	}
	sort.Strings(rec.EnvNames)
	sc := &script{Script: req.Script, AfterScript: req.AfterScript, Env: req.Env, Image: req.Image, Services: req.Services}
	err := q.batch(func(tx tx) error {
		existing = ""
		if rec.IdemKey != "" {
			// Read as a record: the commit requires it unchanged, so
			// two submits with one key never both queue a job.
			v, err := tx.get(bucketIdem, []byte(rec.IdemKey))
			if err != nil {
				return err
			}
			if v != nil {
				existing = string(v)
				return nil
			}
		}
		seq, err := tx.nextSequence()
		if err != nil {
			return err
		}
		// Before the job is visible: once committed, a job loop may take
		// it and open its log at once, and a stale log file of this
		// number must be gone by then, never removed under the running job.
		q.st.issued(seq)
		k := seqKey(seq)
		rec.ID = strconv.FormatUint(seq, 10)
		if err := saveRecord(tx, k, rec); err != nil {
			return err
		}
		if err := saveScript(tx, k, sc); err != nil {
			return err
		}
		// The index entry marks a job that resumes an environment, so that
		// Len can leave it out of the demand without decoding records.
		var mark []byte
		if req.Resume != "" {
			mark = queuedResume
		}
		if rec.IdemKey != "" {
			if err := tx.put(bucketIdem, []byte(rec.IdemKey), []byte(rec.ID)); err != nil {
				return err
			}
		}
		return tx.put(bucketQueued, k, mark)
	})
	if err != nil {
		return api.Job{}, false, q.storeError("queue the job", err)
	}
	if existing != "" {
		job, err := q.Get(existing)
		if err != nil {
			return api.Job{}, false, fmt.Errorf("job %s was submitted with this %s before, but cannot be read: %w", existing, IdempotencyHeader, err)
		}
		q.log.Info("submit already applied: answered with the job its idempotency key made", "job", existing, "owner", p.Name)
		return job, true, nil
	}
	q.saveIssued()
	if b, ok := q.st.(*etcdBackend); ok {
		b.floorFromID(rec.ID) // the others see it through their watch
	}
	q.log.Info("job queued", "job", rec.ID, "owner", p.Name, "timeout", spec.Timeout, "suspend", req.Suspend, "resume", req.Resume != "")
	q.changed.fire()
	return rec.apiJob(sc), false, nil
}

// storeError explains a failed write: nothing was changed.
func (q *Queue) storeError(what string, err error) error {
	return q.st.explain(what, err)
}

// Request takes the oldest queued job and marks it running. It never blocks:
// with no queued job it returns (nil, nil) at once; use WaitForJobs to wait.
func (q *Queue) Request(ctx context.Context) (jobsource.Job, error) {
	return q.take(ctx, func(tx tx) ([]byte, error) {
		var first []byte
		err := tx.scan(bucketQueued, false, func(k, _ []byte) (bool, error) {
			first = append([]byte(nil), k...)
			return false, nil
		})
		return first, err
	})
}

// take marks the queued job that pick chooses (nil: none) running and hands
// it out. pick runs in a read transaction, then again inside the write
// transaction, and must not change anything.
func (q *Queue) take(ctx context.Context, pick func(tx) ([]byte, error)) (jobsource.Job, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if q.isClosed() {
		return nil, ErrClosed
	}
	if err := q.takeOverOnce(); err != nil {
		return nil, q.storeError("take a job from the queue", err)
	}
	// Look first in a read transaction: a write transaction costs a
	// commit and an fsync even when it changes nothing, and the manager
	// asks for a resume job before every plain one.
	var found bool
	if err := q.st.view(func(tx tx) error {
		k, err := pick(tx)
		found = k != nil
		return err
	}); err != nil {
		return nil, q.storeError("look for a queued job", err)
	}
	if !found {
		return nil, nil
	}
	now := time.Now().UTC()
	var rec *record
	var sc *script
	var key []byte
	err := q.leaderUpdate(func(tx tx) error {
		rec, sc, key = nil, nil, nil
		k, err := pick(tx)
		if err != nil || k == nil {
			return err
		}
		key = append([]byte(nil), k...)
		rec, sc, err = q.takeIn(tx, key, now)
		return err
	})
	if err != nil {
		return nil, q.storeError("take a job from the queue", err)
	}
	if rec == nil {
		return nil, nil
	}
	j, err := q.hand(key, rec, sc)
	if err != nil {
		return nil, err
	}
	q.changed.fire()
	return j, nil
}

// takeIn marks the queued job under key running inside tx and returns its
// record and script; a nil record means there was nothing to take (a
// dangling index entry, dropped, or a damaged record, quarantined), and the
// caller asks again.
func (q *Queue) takeIn(tx tx, key []byte, now time.Time) (*record, *script, error) {
	r, err := loadRecord(tx, key)
	if err == nil && r != nil && r.State == api.JobQueued {
		_, err = loadScript(tx, key)
	}
	var re *readError
	if errors.As(err, &re) {
		return nil, nil, err // the store failed, not the record
	}
	if err != nil {
		// A damaged job must not wedge the job loop on itself: set
		// it aside with the reason and let the caller ask again.
		q.log.Error("job record damaged; quarantined, the queue goes on", "job", jobID(key), "err", err)
		return nil, nil, quarantine(tx, key, "its record is damaged: "+err.Error(), q.keepGoodCopy(), now)
	}
	if err := tx.del(bucketQueued, key); err != nil {
		return nil, nil, err
	}
	if r == nil || r.State != api.JobQueued {
		// A dangling index entry: drop it and let the caller ask
		// again rather than hand out a job that is not queued.
		return nil, nil, nil
	}
	sc, err := loadScript(tx, key)
	if err != nil {
		return nil, nil, err
	}
	r.State = api.JobRunning
	r.StartedAt = &now
	if err := saveRecord(tx, key, r); err != nil {
		return nil, nil, err
	}
	return r, sc, tx.put(bucketRunning, key, nil)
}

// hand turns a job just marked running into the live job the manager runs.
func (q *Queue) hand(key []byte, rec *record, sc *script) (*Job, error) {
	j := newJob(q, key, rec, sc)
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		j.closeLog()
		return nil, ErrClosed
	}
	q.live[rec.ID] = j
	q.mu.Unlock()
	q.log.Info("job started", "job", rec.ID, "queue_wait", j.QueueWait())
	return j, nil
}

// WaitForJobs blocks until a queued job exists, ctx is done or the queue is
// closed. Another caller may take the job first, so Request can still return
// nil afterwards.
func (q *Queue) WaitForJobs(ctx context.Context) error {
	for {
		ch := q.changed.wait()
		pending := false
		err := q.st.view(func(tx tx) error {
			return tx.scan(bucketQueued, false, func([]byte, []byte) (bool, error) {
				pending = true
				return false, nil
			})
		})
		if err != nil {
			if q.isClosed() {
				return ErrClosed
			}
			return fmt.Errorf("look for queued jobs: %w", err)
		}
		if pending {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-q.done:
			return ErrClosed
		}
	}
}

// queuedResume is the value of a queued-index entry whose job resumes a
// parked environment (entries of other jobs are empty).
var queuedResume = []byte("resume")

// Len returns how many jobs are queued (not yet taken) that need a new
// booking, for the scaler's demand: they need instances even before
// anything books for them. Jobs that resume an environment are left out:
// their environment's own instance serves them.
func (q *Queue) Len() (int, error) {
	n := 0
	err := q.st.view(func(tx tx) error {
		return tx.scan(bucketQueued, false, func(_, v []byte) (bool, error) {
			if !bytes.Equal(v, queuedResume) {
				n++
			}
			return true, nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("count queued jobs: %w", err)
	}
	return n, nil
}

// Get returns one job.
func (q *Queue) Get(id string) (api.Job, error) {
	k, ok := idKey(id)
	if !ok {
		return api.Job{}, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	var job api.Job
	var why string
	err := q.st.view(func(tx tx) error {
		rec, err := loadRecord(tx, k)
		if err == nil && rec == nil {
			why = quarantineReason(tx, k)
		}
		if err != nil || rec == nil {
			return err
		}
		sc, err := loadScript(tx, k)
		if err != nil {
			return err
		}
		job = rec.apiJob(sc)
		return nil
	})
	if err != nil {
		if q.st.closed(err) {
			return api.Job{}, ErrClosed
		}
		return api.Job{}, fmt.Errorf("read job %s: %w", id, err)
	}
	if job.ID == "" && why != "" {
		return api.Job{}, fmt.Errorf("job %q was set aside (quarantined) because %s: %w", id, why, ErrNotFound)
	}
	if job.ID == "" {
		return api.Job{}, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	q.explainWait(&job)
	return job, nil
}

func (q *Queue) get(id string) (*record, error) {
	k, ok := idKey(id)
	if !ok {
		return nil, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	var rec *record
	err := q.st.view(func(tx tx) error {
		var err error
		rec, err = loadRecord(tx, k)
		return err
	})
	if err != nil {
		if q.st.closed(err) {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("read job %s: %w", id, err)
	}
	if rec == nil {
		return nil, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	return rec, nil
}

// List returns up to limit jobs (the newest ones), oldest first. state, when
// not empty, keeps only jobs in that state. limit <= 0 means all. Scripts
// are cut to ListScriptBytes so that a list stays small; Get has them whole.
func (q *Queue) List(state api.JobState, limit int) ([]api.Job, error) {
	return q.ListFor(api.Principal{Name: api.AdminName, Admin: true}, state, limit)
}

// ListFor is List as p sees it: only the jobs p owns (all for the admin).
func (q *Queue) ListFor(p api.Principal, state api.JobState, limit int) ([]api.Job, error) {
	var out []api.Job
	err := q.st.view(func(tx tx) error {
		out = out[:0]
		return tx.scan(bucketJobs, true, func(k, v []byte) (bool, error) {
			var rec record
			if err := decodeValue(v, &rec); err != nil {
				// One damaged record must not hide the others; Open
				// quarantines it at the next start.
				q.log.Warn("skipping a damaged job record in the list", "job", jobID(k), "err", err)
				return true, nil
			}
			if (state != "" && rec.State != state) || !p.Owns(rec.Owner) {
				return true, nil
			}
			sc, err := loadScript(tx, k)
			var re *readError
			if errors.As(err, &re) {
				return false, err
			}
			if err != nil {
				q.log.Warn("skipping a job with a damaged script in the list", "job", rec.ID, "err", err)
				return true, nil
			}
			out = append(out, rec.apiJob(cutScript(sc)))
			return limit <= 0 || len(out) < limit, nil
		})
	})
	if err != nil {
		if q.st.closed(err) {
			return nil, ErrClosed
		}
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	if out == nil {
		out = []api.Job{}
	}
	for i := range out {
		q.explainWait(&out[i])
	}
	return out, nil
}

// Cancel cancels a job. A queued job is canceled at once and never runs; a
// running job's Canceled channel is closed and the job ends when the
// manager finishes it. A finished job yields ErrFinished.
func (q *Queue) Cancel(id string) (api.Job, error) {
	k, ok := idKey(id)
	if !ok {
		return api.Job{}, fmt.Errorf("job %q: %w", id, ErrNotFound)
	}
	now := time.Now().UTC()
	var rec *record
	var sc *script
	err := q.update(func(tx tx) error {
		rec, sc = nil, nil
		r, err := loadRecord(tx, k)
		if err != nil {
			return err
		}
		if r == nil {
			return fmt.Errorf("job %q: %w", id, ErrNotFound)
		}
		if sc, err = loadScript(tx, k); err != nil {
			return err
		}
		rec = r
		switch r.State {
		case api.JobQueued:
			r.State = api.JobCanceled
			r.Failure = string(jobsource.FailureCanceled)
			r.Reason = "canceled before it started"
			r.FinishedAt = &now
			if err := tx.del(bucketQueued, k); err != nil {
				return err
			}
		case api.JobRunning:
			if r.CancelRequested {
				return nil
			}
			r.CancelRequested = true
		default:
			return fmt.Errorf("job %s ended as %s: %w; nothing to cancel", id, r.State, ErrFinished)
		}
		return saveRecord(tx, k, r)
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrFinished) {
			return api.Job{}, err
		}
		return api.Job{}, q.storeError("cancel job "+id, err)
	}
	if rec.State == api.JobRunning {
		q.mu.Lock()
		j := q.live[id]
		q.mu.Unlock()
		if j != nil {
			j.cancel()
		}
		q.log.Info("cancel requested for running job", "job", id, "instance", rec.Instance)
	} else {
		q.log.Info("queued job canceled", "job", id)
	}
	q.changed.fire()
	return rec.apiJob(sc), nil
}

func (q *Queue) isClosed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

func (q *Queue) liveJob(id string) *Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.live[id]
}

func (q *Queue) logPath(id string) string {
	return filepath.Join(q.logDir, id+".log")
}

// appendNote adds a line from berth to a job's log, so that someone reading
// only the log learns why it ended. Best effort: the job's state already
// carries the reason.
func (q *Queue) appendNote(id, note string) {
	if err := q.st.appendNote(id, note); err != nil {
		q.log.Warn("cannot add a note to the job log", "job", id, "err", err)
	}
}

// ListScriptBytes is how much of each script List returns.
const ListScriptBytes = 256

// script is what a job runs, stored apart from its record (bucket
// "scripts") because it is written once while the record changes several
// times: state updates then rewrite a few hundred bytes, not a megabyte,
// and still fit when the disk is nearly full.
type script struct {
	Script      string            `json:"script"`
	AfterScript string            `json:"after_script,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	Image       *api.Image        `json:"image,omitempty"`
	Services    []api.Service     `json:"services,omitempty"`
}

// record is a job's state as stored in bbolt (bucket "jobs").
type record struct {
	ID              string        `json:"id"`
	Owner           string        `json:"owner,omitempty"` // "" for the admin (see owner.go)
	State           api.JobState  `json:"state"`
	EnvNames        []string      `json:"env_names,omitempty"`
	Timeout         time.Duration `json:"timeout_ns,omitempty"`
	Suspend         bool          `json:"suspend,omitempty"`
	Resume          string        `json:"resume,omitempty"`
	CreatedAt       time.Time     `json:"created_at"`
	StartedAt       *time.Time    `json:"started_at,omitempty"`
	FinishedAt      *time.Time    `json:"finished_at,omitempty"`
	ExitCode        *int          `json:"exit_code,omitempty"`
	Failure         string        `json:"failure,omitempty"`
	Reason          string        `json:"reason,omitempty"`
	Instance        string        `json:"instance,omitempty"`
	EnvKey          string        `json:"env_key,omitempty"`
	CancelRequested bool          `json:"cancel_requested,omitempty"`
	// IdemKey is the job's entry in the idempotency bucket (idem.go).
	IdemKey string `json:"idem_key,omitempty"`
}

// apiJob converts a record; sc may be nil when the script is not needed.
func (r *record) apiJob(sc *script) api.Job {
	j := api.Job{
		ID:              r.ID,
		Owner:           r.Owner,
		State:           r.State,
		EnvNames:        r.EnvNames,
		Suspend:         r.Suspend,
		Resume:          r.Resume,
		CreatedAt:       r.CreatedAt,
		StartedAt:       r.StartedAt,
		FinishedAt:      r.FinishedAt,
		ExitCode:        r.ExitCode,
		Failure:         r.Failure,
		Reason:          r.Reason,
		Instance:        r.Instance,
		EnvKey:          r.EnvKey,
		CancelRequested: r.CancelRequested && r.State == api.JobRunning,
	}
	if r.Timeout > 0 {
		j.Timeout = r.Timeout.String()
	}
	if sc != nil {
		j.Script = sc.Script
		j.AfterScript = sc.AfterScript
		j.Image, j.Services = sc.Image, sc.Services
	}
	return j
}

func (r *record) spec(sc *script) jobsource.Spec {
	s := jobsource.Spec{
		Timeout:   r.Timeout,
		Suspend:   r.Suspend,
		ResumeKey: r.Resume,
	}
	if sc == nil {
		return s
	}
	s.Script = sc.Script
	s.AfterScript = sc.AfterScript
	s.Image, s.Services = specImage(sc.Image, sc.Services)
	names := make([]string, 0, len(sc.Env))
	for k := range sc.Env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		s.Env = append(s.Env, k+"="+sc.Env[k])
	}
	return s
}

func loadScript(tx tx, k []byte) (*script, error) {
	v, err := tx.get(bucketScripts, k)
	if err != nil || v == nil {
		return nil, err
	}
	var sc script
	if err := decodeValue(v, &sc); err != nil {
		return nil, fmt.Errorf("decode script of job %d: %w", binary.BigEndian.Uint64(k), err)
	}
	return &sc, nil
}

func saveScript(tx tx, k []byte, sc *script) error {
	v, err := encodeValue(tx, sc)
	if err != nil {
		return fmt.Errorf("encode script: %w", err)
	}
	return tx.put(bucketScripts, k, v)
}

func loadRecord(tx tx, k []byte) (*record, error) {
	v, err := tx.get(bucketJobs, k)
	if err != nil || v == nil {
		return nil, err
	}
	var rec record
	if err := decodeValue(v, &rec); err != nil {
		return nil, fmt.Errorf("decode job %d: %w", binary.BigEndian.Uint64(k), err)
	}
	return &rec, nil
}

func saveRecord(tx tx, k []byte, rec *record) error {
	v, err := encodeValue(tx, rec)
	if err != nil {
		return fmt.Errorf("encode job %s: %w", rec.ID, err)
	}
	return tx.put(bucketJobs, k, v)
}

// seqKey makes keys sort in submission order, which is what FIFO needs.
func seqKey(seq uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, seq)
	return k
}

func idKey(id string) ([]byte, bool) {
	if id == "" || strings.HasPrefix(id, "0") || strings.HasPrefix(id, "+") {
		return nil, false
	}
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil || n == 0 {
		return nil, false
	}
	return seqKey(n), true
}

// notifier wakes every waiter at once by closing a channel and replacing it.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func (n *notifier) init() { n.ch = make(chan struct{}) }

// wait returns a channel that is closed at the next fire. Take it before
// checking the condition, so that a fire in between is not missed.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notifier) fire() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.ch)
	n.ch = make(chan struct{})
}
