package gitlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-ci/berth/jobsource"
)

// ErrTokenRejected is returned (wrapped) when GitLab answers 403 to the
// runner token: the runner was deleted or the token is wrong. Retrying does
// not help; a human has to fix the configuration.
var ErrTokenRejected = errors.New("gitlab runner token rejected")

// ErrUnavailable is returned (wrapped) when GitLab kept answering 503 or
// could not be reached for all retries of one job request.
var ErrUnavailable = errors.New("gitlab unavailable")

// Source takes jobs from GitLab. It is safe for concurrent use: the manager
// calls Request once per booked slot, possibly many at once.
type Source struct {
	cfg    Config
	log    *slog.Logger
	client *client
	// server names the GitLab server in cache keys (cachejob.go).
	server string
	// set is the settings a reload may change (settings.go); polls bounds
	// the polls in flight to its RequestConcurrency.
	set   atomic.Pointer[Settings]
	polls *gate

	mu         sync.Mutex
	lastUpdate string
	// mine holds the jobs handed to this process whose Finish has not
	// returned: a sweep leaves them to it (ledger.go).
	mine map[int64]bool
	// slots numbers the running jobs (slots.go).
	slots map[int64]jobSlot
	// abandoned runs FailAbandoned once, at the first Request (ledger.go).
	abandoned sync.Once
	// sweeping is held by the FailAbandoned running.
	sweeping sync.Mutex

	// tmu guards the runner token in use (token.go): rotation replaces it.
	tmu     sync.Mutex
	tok     tokenState
	unsaved bool // rotated, but not yet written to token_file

	// vmu guards what Ready learnt of the token (ready.go).
	vmu      sync.Mutex
	verified bool
	fatal    error
	problem  string
}

var _ jobsource.Source = (*Source)(nil)

// New returns a source for cfg. It does no I/O; Ready verifies the token
// before the first poll.
func New(cfg Config, logger *slog.Logger) (*Source, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	st := settingsOf(cfg)
	s := &Source{
		cfg: cfg,
		log: logger.With("source", cfg.Name),
		client: &client{
			base:    cfg.URL,
			http:    cfg.HTTPClient,
			timeout: cfg.RequestTimeout,
			agent:   "berth/" + cfg.Version,
		},
		server: serverName(cfg.URL),
		tok:    tokenState{value: cfg.Token},
		polls:  newGate(st.RequestConcurrency),
		mine:   map[int64]bool{},
	}
	s.set.Store(&st)
	return s, nil
}

// Name identifies the source in logs and metrics.
func (s *Source) Name() string { return s.cfg.Name }

// CheckInterval is how long the manager should wait after an empty poll
// before booking a slot and polling again (gitlab-runner's check_interval).
func (s *Source) CheckInterval() time.Duration { return s.set.Load().CheckInterval }

func (s *Source) runnerHeader() http.Header {
	h := http.Header{}
	h.Set("RUNNER-TOKEN", s.token())
	return h
}

func (s *Source) tokenRejected() error {
	return fmt.Errorf("%w by %s: create a runner in GitLab (Settings > CI/CD > Runners > New runner) "+
		"and put its glrt- token in token or token_file of the [[source]] kind = \"gitlab\" section of berth.toml",
		ErrTokenRejected, s.cfg.URL)
}

// Verify checks the runner token with POST /runners/verify, so that a wrong
// or deleted token is a clear startup error rather than a silent idle runner.
func (s *Source) Verify(ctx context.Context) error {
	resp, err := s.client.doJSON(ctx, http.MethodPost, "runners/verify", s.runnerHeader(), verifyRequest{
		Token:    s.token(),
		SystemID: s.cfg.SystemID,
		Info:     s.versionInfo(),
	})
	if err != nil {
		return fmt.Errorf("verifying gitlab runner token at %s: %w", s.cfg.URL, err)
	}
	switch resp.status {
	case http.StatusOK, http.StatusCreated:
		s.noteExpiry(resp.body) // token.go
		s.log.Info("gitlab runner token verified", "system_id", s.cfg.SystemID)
		return nil
	case http.StatusForbidden, http.StatusUnauthorized:
		return s.tokenRejected()
	default:
		return fmt.Errorf("verifying gitlab runner token at %s: unexpected status %d: %s",
			s.cfg.URL, resp.status, truncate(resp.body, 200))
	}
}

// Request asks GitLab for one job, long-polling when a previous poll found
// nothing. It returns (nil, nil) when there is no job. 409 (another runner
// took the job) and 503 are retried with backoff; a rejected token is an
// error wrapping ErrTokenRejected.
func (s *Source) Request(ctx context.Context) (jobsource.Job, error) {
	if err := s.polls.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.polls.release()
	s.abandoned.Do(func() { // ledger.go
		if _, err := s.FailAbandoned(ctx); err != nil {
			s.log.Warn("gitlab jobs an earlier berth left stay running on GitLab until a later sweep", "err", err)
		}
	})

	var lastErr error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if attempt > s.cfg.RetryLimit {
				break
			}
			if err := sleep(ctx, backoff(attempt-1, s.cfg.RetryBaseDelay, s.cfg.RetryMaxDelay)); err != nil {
				return nil, err
			}
		}
		s.mu.Lock()
		lastUpdate := s.lastUpdate
		s.mu.Unlock()
		resp, err := s.client.doJSON(ctx, http.MethodPost, "jobs/request", s.runnerHeader(), jobRequest{
			Token:      s.token(),
			SystemID:   s.cfg.SystemID,
			LastUpdate: lastUpdate,
			Info:       s.versionInfo(),
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			lastErr = err
			s.log.Warn("gitlab job request failed, retrying", "err", err, "attempt", attempt+1)
			continue
		}
		switch resp.status {
		case http.StatusCreated:
			var p jobPayload
			if err := json.Unmarshal(resp.body, &p); err != nil {
				return nil, fmt.Errorf("decoding gitlab job payload: %w", err)
			}
			s.ledgerAdd(&p) // ledger.go
			j := newJob(s, &p)
			s.log.Info("received gitlab job", "job", p.ID, "name", p.JobInfo.Name, "project", p.JobInfo.ProjectName)
			return j, nil
		case http.StatusNoContent:
			if lu := resp.header.Get("X-GitLab-Last-Update"); lu != "" {
				s.mu.Lock()
				s.lastUpdate = lu
				s.mu.Unlock()
			}
			return nil, nil
		case http.StatusConflict:
			// Another runner won the race for the job; asking again may
			// return the next one.
			lastErr = errConflict
			s.log.Debug("gitlab job request conflict, retrying", "attempt", attempt+1)
		case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusGatewayTimeout:
			lastErr = fmt.Errorf("%w: status %d", ErrUnavailable, resp.status)
			s.log.Warn("gitlab unavailable, retrying job request", "status", resp.status, "attempt", attempt+1)
		case http.StatusForbidden, http.StatusUnauthorized:
			return nil, s.tokenRejected()
		default:
			return nil, fmt.Errorf("gitlab job request: unexpected status %d: %s", resp.status, truncate(resp.body, 200))
		}
	}
	if !errors.Is(lastErr, errConflict) {
		return nil, fmt.Errorf("gitlab job request at %s failed after %d attempts: %w", s.cfg.URL, s.cfg.RetryLimit+1, lastErr)
	}
	// Every attempt lost a race: there is no job for us right now, which
	// is not an error; the manager gives the booking back.
	s.log.Info("gitlab jobs kept being taken by other runners", "attempts", s.cfg.RetryLimit+1)
	return nil, nil
}

// errConflict marks a 409: another runner took the job we were offered.
var errConflict = errors.New("job taken by another runner (409)")

// backoff returns the delay before retry number attempt (from 0): exponential
// from base, capped at max, with jitter in [d/2, d] so that many berth
// processes do not retry in lockstep.
func backoff(attempt int, base, max time.Duration) time.Duration {
	d := base
	for i := 0; i < attempt && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
