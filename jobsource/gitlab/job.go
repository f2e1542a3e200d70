package gitlab

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-ci/berth/internal/oneshot"
	"github.com/berth-ci/berth/jobsource"
)

// Job is one GitLab job. Its log is buffered in memory, masked, and streamed
// to GitLab by a background loop that also keeps the job alive and watches
// for cancellation; Finish stops the loop and reports the result.
type Job struct {
	src *Source
	// set is the source's settings when GitLab handed the job out: a
	// reload does not change a job midway.
	set    *Settings
	p      *jobPayload
	spec   jobsource.Spec
	log    *slog.Logger
	path   string // jobs/:id
	header http.Header

	stopLoop context.CancelFunc
	loopDone chan struct{}
	cancelCh chan jobsource.CancelRequest

	finishOnce sync.Once
	finishErr  error

	mu          sync.Mutex
	buf         []byte // the masked log, exactly what GitLab should end up with
	sent        int    // bytes GitLab has acknowledged
	masker      *masker
	truncated   bool
	closed      bool // Finish has started: later writes are dropped
	gone        bool // GitLab no longer accepts updates for this job
	interval    time.Duration
	lastContact time.Time
	instance    string
	cancelState cancelState
	firstCancel jobsource.CancelRequest // what AfterCancel's functions get
	cancelHooks oneshot.Hooks
	// dirs holds the builds and project dirs once resolved on the instance (stage.go).
	dirs [2]string
	// git holds the job's git variables (sources.go); gitErr says why
	// they are unusable.
	git     gitOptions
	gitErr  error
	tmpName string  // the job's temp dir in the builds dir (spec.go)
	vars    jobVars // the job's variables, expanded (variables.go)
	// cacheWarnings go to the restore_cache section (expand.go).
	cacheWarnings []string
	pullErr       error // the job's image:pull_policy is not allowed
	// failed says why Prepare failed, in GitLab's terms (failure.go).
	failed atomic.Pointer[prepareError]
}

type cancelState int

const (
	notCanceled cancelState = iota
	canceledGracefully
	canceledHard
)

var (
	_ jobsource.Job           = (*Job)(nil)
	_ jobsource.CancelWatcher = (*Job)(nil)
)

func newJob(s *Source, p *jobPayload) *Job {
	tmpName := fmt.Sprintf("berth-gitlab-%d-%s", p.ID, randomString(8))
	env := runnerEnv{version: s.cfg.Version, tmpName: tmpName, timeout: jobTimeout(p), caChain: s.cfg.CAChain}
	env.concurrent, env.projectSlot = s.takeSlot(p.ID, p.JobInfo.ProjectID)
	set := s.set.Load()
	if (p.Image == nil || p.Image.Name == "") && set.DefaultImage != "" {
		// The source's image, as gitlab-runner's [runners.docker] image.
		p.Image = &jobImage{Name: set.DefaultImage}
	}
	// Image names first: CI_JOB_IMAGE is the expanded one. Then the git
	// options, which place the project dir (GIT_CLONE_PATH), then the
	// variables the job sees.
	expandImages(p, newJobVars(p.Variables, env))
	if p.Image != nil {
		env.image = p.Image.Name
	}
	git, gitErr := gitOptionsOf(p, newJobVars(p.Variables, env))
	env.projectRel = projectRel(p, git)
	vars := newJobVars(p.Variables, env)
	cacheWarnings := expandPayload(p, vars)
	var secrets []string
	for _, vs := range [][]jobVariable{p.Variables, vars} { // as sent and as expanded
		for _, v := range vs {
			if v.Masked {
				secrets = append(secrets, v.Value)
			}
		}
	}
	// The job token gives access to the project; GitLab masks it too, and
	// berth's git credentials carry it (sources.go).
	secrets = append(secrets, p.Token, tokenHeaderSecret(p))
	// The runner token never goes to an instance (it travels only in
	// berth's own requests to GitLab), but should a job find it anyway, in
	// a file or a process it can read, its log must not carry it to
	// everyone who can read the job.
	secrets = append(secrets, s.token())

	ctx, cancel := context.WithCancel(context.Background())
	header := http.Header{}
	header.Set("JOB-TOKEN", p.Token)
	j := &Job{
		src:         s,
		set:         set,
		p:           p,
		log:         s.log.With("job", p.ID),
		path:        "jobs/" + strconv.FormatInt(p.ID, 10),
		header:      header,
		stopLoop:    cancel,
		loopDone:    make(chan struct{}),
		cancelCh:    make(chan jobsource.CancelRequest, 1),
		masker:      newMasker(secrets, p.Features.TokenMaskPrefixes),
		interval:    s.cfg.UpdateInterval,
		lastContact: time.Now(),
	}
	j.git, j.gitErr, j.vars, j.cacheWarnings = git, gitErr, vars, cacheWarnings
	j.tmpName = tmpName
	j.spec = buildSpec(p, vars, set.BuildsDir, env.projectRel, tmpName)
	if j.spec.Image != nil {
		j.spec.Image.PullPolicy, j.pullErr = pullPolicy(p.Image, s.cfg.AllowedPullPolicies)
	}
	j.writeLine(fmt.Sprintf("Running with berth %s on %s (system ID %s)", s.cfg.Version, s.cfg.Name, s.cfg.SystemID))
	go j.run(ctx)
	return j
}

// ID is GitLab's job ID.
func (j *Job) ID() string { return strconv.FormatInt(j.p.ID, 10) }

// Spec returns the shell scripts that fetch the sources and run the job.
func (j *Job) Spec() jobsource.Spec { return j.spec }

// Log returns the writer for the job's output. Masked variables' values are
// replaced with [MASKED] before anything is kept or sent.
func (j *Job) Log() io.Writer { return logWriter{j} }

// Canceled delivers GitLab's cancel requests. A graceful request
// (Job-Status: canceling) is sent as a value and leaves the channel open,
// because it may still be followed by a hard one; a hard request (the job
// was canceled or failed in GitLab, or GitLab refused the log with 403) is
// sent as a value and then the channel is closed.
func (j *Job) Canceled() <-chan jobsource.CancelRequest { return j.cancelCh }

// AfterCancel arranges for f to run once GitLab cancels the job (see
// jobsource.CancelWatcher). f gets the first request, graceful or hard, as
// a single receive from Canceled would; a hard cancel after a graceful one
// does not call f again.
func (j *Job) AfterCancel(f func(jobsource.CancelRequest)) (stop func() bool) {
	return j.cancelHooks.After(func() {
		j.mu.Lock()
		r := j.firstCancel
		j.mu.Unlock()
		f(r)
	})
}

// Started notes the instance in the log, so a user can tell where the job ran.
func (j *Job) Started(instance string) {
	j.mu.Lock()
	j.instance = instance
	j.mu.Unlock()
	j.writeLine("Running on instance " + instance)
}

type logWriter struct{ j *Job }

// Write never fails: a log that cannot be shipped must not fail the job.
func (w logWriter) Write(p []byte) (int, error) {
	j := w.j
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.closed {
		j.appendLocked(j.masker.write(p))
	}
	return len(p), nil
}

func (j *Job) writeLine(s string) { _, _ = j.Log().Write([]byte(s + "\n")) }

// appendLocked adds masked output, enforcing the output limit the way
// gitlab-runner does: one notice, then nothing more.
func (j *Job) appendLocked(b []byte) {
	if j.truncated || len(b) == 0 {
		return
	}
	if room := j.set.OutputLimit - len(j.buf); len(b) > room {
		j.buf = append(j.buf, b[:max(room, 0)]...)
		j.buf = append(j.buf, fmt.Sprintf("\nJob's log exceeded limit of %d bytes.\n"+
			"Job execution will continue but no more output will be collected.\n", j.set.OutputLimit)...)
		j.truncated = true
		return
	}
	j.buf = append(j.buf, b...)
}

// requestCancel tells the manager to stop the job. It is idempotent, and a
// hard cancel may follow a graceful one.
func (j *Job) requestCancel(graceful bool, why string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.cancelState == canceledHard || graceful && j.cancelState == canceledGracefully {
		return
	}
	if j.cancelState == notCanceled {
		j.firstCancel = jobsource.CancelRequest{Graceful: graceful}
	}
	if graceful {
		j.cancelState = canceledGracefully
		j.cancelCh <- jobsource.CancelRequest{Graceful: true} // buffer is empty: first send
	} else {
		select { // replace an unread graceful request
		case <-j.cancelCh:
		default:
		}
		j.cancelState = canceledHard
		j.cancelCh <- jobsource.CancelRequest{Graceful: false}
		close(j.cancelCh)
	}
	j.cancelHooks.Fire() // the first request only: later ones do nothing
	j.log.Info("gitlab canceled job", "graceful", graceful, "why", why)
}

// abort marks the job as no longer ours: GitLab will not accept updates.
func (j *Job) abort(why string) {
	j.mu.Lock()
	j.gone = true
	j.mu.Unlock()
	j.requestCancel(false, why)
}

// handleJobStatus acts on the Job-Status header GitLab adds to answers.
func (j *Job) handleJobStatus(h http.Header) {
	switch h.Get("Job-Status") {
	case "canceling":
		j.requestCancel(true, "Job-Status: canceling")
	case "canceled", "failed":
		j.abort("Job-Status: " + h.Get("Job-Status"))
	}
}

func (j *Job) noteContact(h http.Header) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lastContact = time.Now()
	if d, ok := updateInterval(h); ok {
		j.interval = min(d, j.src.cfg.MaxUpdateInterval)
	}
}

// run streams the log and keeps the job alive until Finish stops it or
// GitLab says the job is gone. It paces itself as gitlab-runner's job trace
// does (network/trace.go): new output goes out once per GitLab's update
// interval, and an idle job is touched only after keepAliveAfter of
// silence, so a quiet job costs GitLab one PUT per max(30 s, interval)
// rather than one per interval (docs/gitlab.md, "How often berth talks to
// GitLab").
func (j *Job) run(ctx context.Context) {
	defer close(j.loopDone)
	for {
		j.mu.Lock()
		wait := min(j.interval, j.keepAliveAfterLocked()-time.Since(j.lastContact))
		j.mu.Unlock()
		if err := sleep(ctx, max(wait, time.Millisecond)); err != nil {
			return
		}
		j.mu.Lock()
		gone, unsent := j.gone, j.sent < len(j.buf)
		idle := time.Since(j.lastContact) >= j.keepAliveAfterLocked()
		j.mu.Unlock()
		switch {
		case gone:
			return
		case unsent:
			if st, err := j.patch(ctx); st == patchFailed && ctx.Err() == nil {
				j.log.Warn("sending job log to gitlab failed, will retry", "err", err)
			}
		case idle:
			j.keepAlive(ctx)
		}
	}
}

// keepAliveAfterLocked is the silence after which an idle job is touched:
// GitLab's interval, and never less than KeepAliveInterval; j.mu held.
func (j *Job) keepAliveAfterLocked() time.Duration {
	return max(j.interval, j.src.cfg.KeepAliveInterval)
}

type patchState int

const (
	patchOK patchState = iota
	patchRangeMismatch
	patchGone
	patchFailed
)

// patch sends the next unsent part of the log.
func (j *Job) patch(ctx context.Context) (patchState, error) {
	j.mu.Lock()
	start := j.sent
	end := min(len(j.buf), start+defaultMaxPatchSize)
	chunk := append([]byte(nil), j.buf[start:end]...)
	j.mu.Unlock()
	if len(chunk) == 0 {
		return patchOK, nil
	}
	h := j.header.Clone()
	// Inclusive byte offsets, no unit, as the runner API expects.
	h.Set("Content-Range", fmt.Sprintf("%d-%d", start, end-1))
	resp, err := j.src.client.do(ctx, http.MethodPatch, j.path+"/trace", h, "text/plain", chunk)
	if err != nil {
		return patchFailed, fmt.Errorf("sending job log: %w", err)
	}
	switch resp.status {
	case http.StatusAccepted:
		j.noteContact(resp.header)
		n, ok := rangeEnd(resp.header)
		if !ok {
			n = end
		}
		j.setSent(n)
		j.handleJobStatus(resp.header)
		return patchOK, nil
	case http.StatusRequestedRangeNotSatisfiable:
		// GitLab holds a different amount than we think: continue from
		// its end, which its Range header gives.
		j.noteContact(resp.header)
		n, ok := rangeEnd(resp.header)
		if !ok {
			n = 0
		}
		j.log.Warn("gitlab job log range mismatch, resending", "sent", start, "gitlab_has", n)
		j.setSent(n)
		return patchRangeMismatch, nil
	case http.StatusForbidden, http.StatusNotFound:
		j.abort(fmt.Sprintf("log update answered %d: job is no longer running", resp.status))
		return patchGone, nil
	default:
		return patchFailed, fmt.Errorf("sending job log: unexpected status %d: %s", resp.status, truncate(resp.body, 200))
	}
}

func (j *Job) setSent(n int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.sent = min(max(n, 0), len(j.buf))
}

// keepAlive tells GitLab the job still runs when the log has been quiet;
// the answer also carries cancellation.
func (j *Job) keepAlive(ctx context.Context) {
	resp, err := j.src.client.doJSON(ctx, http.MethodPut, j.path, j.header, j.update("running", "", nil))
	if err != nil {
		if ctx.Err() == nil {
			j.log.Warn("gitlab keep-alive failed", "err", err)
		}
		return
	}
	switch resp.status {
	case http.StatusOK, http.StatusAccepted:
		j.noteContact(resp.header)
		j.handleJobStatus(resp.header)
	case http.StatusForbidden, http.StatusNotFound:
		j.abort(fmt.Sprintf("keep-alive answered %d: job is no longer running", resp.status))
	default:
		j.log.Warn("gitlab keep-alive: unexpected status", "status", resp.status)
	}
}

// update builds a PUT /jobs/:id body with the checksum of the whole log, so
// GitLab can tell whether it holds the same log (412 when it does not).
func (j *Job) update(state, reason string, exitCode *int) updateJobRequest {
	j.mu.Lock()
	sum, size := crc32.ChecksumIEEE(j.buf), len(j.buf)
	j.mu.Unlock()
	return updateJobRequest{
		Token:         j.p.Token,
		Info:          j.src.versionInfo(),
		State:         state,
		FailureReason: reason,
		ExitCode:      exitCode,
		Output:        jobOutput{Checksum: fmt.Sprintf("crc32:%08x", sum), Bytesize: size},
	}
}

// errGone says GitLab stopped accepting updates for the job.
var errGone = errors.New("job is no longer running in gitlab")

// Finish sends the rest of the log and the result. It repeats the final
// update while GitLab answers 202, resends the whole log when GitLab's copy
// fails its checksum (412), and gives up quietly when GitLab says the job is
// no longer running (403/404): there is nobody left to tell. Only ctx ends
// retries against an unreachable GitLab.
func (j *Job) Finish(ctx context.Context, r jobsource.Result) error {
	j.finishOnce.Do(func() {
		if j.finishErr = j.finish(ctx, r); j.finishErr == nil {
			j.src.ledgerDone(j.p.ID) // ledger.go
		}
		j.src.released(j.p.ID)
	})
	return j.finishErr
}

func (j *Job) finish(ctx context.Context, r jobsource.Result) error {
	j.stopLoop()
	<-j.loopDone

	j.mu.Lock()
	if r.Instance != "" {
		j.instance = r.Instance
	}
	j.appendLocked(j.masker.flush())
	j.appendLocked(j.masker.write([]byte(j.resultLine(r) + "\n")))
	j.appendLocked(j.masker.flush())
	j.closed = true
	gone := j.gone
	j.mu.Unlock()
	if gone {
		j.log.Info("gitlab no longer accepts updates for the job; result not sent", "failure", r.Failure)
		return nil
	}

	state, reason := "success", ""
	var exitCode *int
	if r.Failure != jobsource.FailureNone {
		state = "failed"
		want := failureReason(r.Failure)
		if pe := j.prepFailure(r); pe != nil {
			want = pe.reason
		}
		reason = allowedReason(want, j.p.Features.FailureReasons)
	}
	if r.ExitCode >= 0 {
		exitCode = &r.ExitCode
	}
	for {
		if err := j.sendAll(ctx); err != nil {
			if errors.Is(err, errGone) {
				return nil
			}
			return fmt.Errorf("gitlab job %d: %w", j.p.ID, err)
		}
		resp, err := j.src.client.doJSON(ctx, http.MethodPut, j.path, j.header, j.update(state, reason, exitCode))
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("gitlab job %d: reporting result: %w", j.p.ID, err)
			}
			j.log.Warn("reporting job result to gitlab failed, retrying", "err", err)
			if err := j.wait(ctx); err != nil {
				return fmt.Errorf("gitlab job %d: reporting result: %w", j.p.ID, err)
			}
			continue
		}
		j.noteContact(resp.header)
		switch resp.status {
		case http.StatusOK:
			j.log.Info("gitlab job finished", "state", state, "failure_reason", reason)
			return nil
		case http.StatusAccepted:
			// GitLab is still processing the log; ask again after its interval.
			if err := j.wait(ctx); err != nil {
				return fmt.Errorf("gitlab job %d: waiting for gitlab to accept the result: %w", j.p.ID, err)
			}
		case http.StatusPreconditionFailed:
			j.log.Warn("gitlab's copy of the job log failed its checksum; resending the whole log")
			j.setSent(0)
		case http.StatusForbidden, http.StatusNotFound:
			j.log.Warn("gitlab refused the job result: job is no longer running", "status", resp.status)
			return nil
		default:
			j.log.Warn("reporting job result to gitlab: unexpected status, retrying", "status", resp.status)
			if err := j.wait(ctx); err != nil {
				return fmt.Errorf("gitlab job %d: reporting result: %w", j.p.ID, err)
			}
		}
	}
}

// sendAll sends the log until GitLab has all of it.
func (j *Job) sendAll(ctx context.Context) error {
	lastMismatch := -1
	for {
		j.mu.Lock()
		done, sent := j.sent >= len(j.buf), j.sent
		j.mu.Unlock()
		if done {
			return nil
		}
		st, err := j.patch(ctx)
		switch st {
		case patchGone:
			return errGone
		case patchRangeMismatch:
			// One immediate retry from GitLab's offset; if GitLab keeps
			// answering the same range, pace the retries.
			if sent != lastMismatch {
				lastMismatch = sent
				continue
			}
			if err := j.wait(ctx); err != nil {
				return fmt.Errorf("sending job log: %w", err)
			}
		case patchFailed:
			if ctx.Err() != nil {
				return err
			}
			j.log.Warn("sending job log to gitlab failed, retrying", "err", err)
			if err := j.wait(ctx); err != nil {
				return fmt.Errorf("sending job log: %w", err)
			}
		}
	}
}

func (j *Job) wait(ctx context.Context) error {
	j.mu.Lock()
	d := j.interval
	j.mu.Unlock()
	return sleep(ctx, d)
}

// resultLine is the last line of the log, in GitLab's words, so that a user
// reading the job page sees why it ended and what to do.
func (j *Job) resultLine(r jobsource.Result) string {
	switch r.Failure {
	case jobsource.FailureNone:
		return "Job succeeded"
	case jobsource.FailureScript:
		return fmt.Sprintf("ERROR: Job failed: exit code %d", r.ExitCode)
	case jobsource.FailureTimeout:
		msg := "ERROR: Job failed: execution took longer than " + j.spec.Timeout.String()
		if j.spec.Timeout <= 0 {
			msg = "ERROR: Job failed: execution took longer than its timeout"
		}
		if r.Message != "" {
			msg += ": " + r.Message
		}
		return msg
	case jobsource.FailureCanceled:
		return "ERROR: Job failed: canceled"
	case jobsource.FailureImagePull:
		return "ERROR: Job failed (image_pull_failure): " + r.Message
	default:
		if pe := j.prepFailure(r); pe != nil && pe.reason != reasonSystem {
			return fmt.Sprintf("\033[31;1mERROR: Job failed (%s): %s\033[0;m", pe.reason, pe.msg)
		}
		where := "before an instance was assigned"
		if j.instance != "" {
			where = "on instance " + j.instance
		}
		msg := r.Message
		if msg == "" {
			msg = "the instance or its provider failed"
		}
		return fmt.Sprintf("ERROR: Job failed (system failure) %s: %s. "+
			"This is not a problem in the job's script: retry the job, and if it keeps failing "+
			"ask the runner's admin to check berth's log and the provider for that instance.", where, msg)
	}
}
