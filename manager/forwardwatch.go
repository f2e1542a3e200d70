package manager

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource/queue"
)

// A standby forwarding to a leader that froze (SIGSTOP, a stalled VM) must
// not hold the request for the whole pause: the client gives up while the
// request may still land on the woken old leader (issue 32). So until the
// leader's response headers come, the standby watches: once this manager
// or another one leads, or the leader stayed silent past forwardDeadline,
// the forwarded request is abandoned. A request that cannot have applied
// twice (a read, a submit with an idempotency key) is then served here if
// this manager leads now, or answered 503 with Retry-After, which clients
// (api.Client) send again; any other request is answered 502 saying it may
// have applied.

// forwardDeadline bounds the wait for the leader's response headers: every
// API answer starts at once (a followed log sends its headers first), so a
// leader silent that long is frozen. Twice the lease: past it the leader
// lost its term anyway, unless it keeps its lease while its API hangs.
func (m *Manager) forwardDeadline() time.Duration {
	return max(2*m.cfg.HA.LeaseTTL, 5*time.Second)
}

// leaderPoll is how often a waiting forward asks etcd who leads.
const leaderPoll = 250 * time.Millisecond

var (
	errLeaderChanged = errors.New("another manager took over while the request waited for the leader")
	errLeaderSilent  = errors.New("the leader did not answer in time")
)

// forward passes r to the leader at target, watching as above.
func (m *Manager) forward(w http.ResponseWriter, r *http.Request, target *url.URL, tr http.RoundTripper, next http.Handler) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		var err error
		// Kept to serve the request here after a takeover; the API's
		// requests are bounded anyway.
		if body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, api.MaxRequestBytes)); err != nil {
			api.WriteError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("read the request: %v", err))
			return
		}
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	headers := make(chan struct{})
	var once sync.Once
	go m.watchForward(ctx, cancel, target, headers)
	fr := r.Clone(ctx)
	fr.Body = io.NopCloser(bytes.NewReader(body))
	fr.ContentLength = int64(len(body))
	p := proxyTo(target, headerSignal{tr, func() { once.Do(func() { close(headers) }) }})
	inner := p.ErrorHandler
	p.ErrorHandler = func(w http.ResponseWriter, pr *http.Request, err error) {
		cause := context.Cause(ctx)
		if !errors.Is(cause, errLeaderChanged) && !errors.Is(cause, errLeaderSilent) {
			inner(w, pr, err)
			return
		}
		m.abandoned(w, r, body, target, cause, next)
	}
	p.ServeHTTP(w, fr)
}

// abandoned answers a request whose forward was given up for cause.
func (m *Manager) abandoned(w http.ResponseWriter, r *http.Request, body []byte, target *url.URL, cause error, next http.Handler) {
	replayable := r.Method == http.MethodGet || r.Method == http.MethodHead || r.Header.Get(queue.IdempotencyHeader) != ""
	m.log.Warn("gave up forwarding a request to the leader", "leader", target.String(), "method", r.Method, "path", r.URL.Path,
		"why", cause, "replayable", replayable, "leading_here", m.ha.leading.Load())
	if !replayable {
		api.WriteError(w, http.StatusBadGateway, fmt.Sprintf("this berth is a standby and gave up forwarding to the leader at %s: %v; the request may have reached it: check (berth jobs) before sending it again", target, cause))
		return
	}
	if m.ha.leading.Load() {
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
		next.ServeHTTP(w, r2)
		return
	}
	w.Header().Set("Retry-After", "1")
	api.WriteError(w, http.StatusServiceUnavailable, fmt.Sprintf("this berth is a standby and gave up forwarding to the leader at %s: %v; send it again (a submit with its Idempotency-Key is answered with the job it made, if it applied)", target, cause))
}

// watchForward cancels ctx with errLeaderChanged once the leader is no
// longer target, or errLeaderSilent after forwardDeadline, unless the
// response headers came first or ctx ended.
func (m *Manager) watchForward(ctx context.Context, cancel context.CancelCauseFunc, target *url.URL, headers <-chan struct{}) {
	deadline := time.NewTimer(m.forwardDeadline())
	defer deadline.Stop()
	tick := time.NewTicker(leaderPoll)
	defer tick.Stop()
	for {
		select {
		case <-headers:
			return
		case <-ctx.Done():
			return
		case <-deadline.C:
			cancel(fmt.Errorf("%w (no response headers within %s)", errLeaderSilent, m.forwardDeadline()))
			return
		case <-tick.C:
		}
		if m.ha.leading.Load() {
			cancel(fmt.Errorf("%w (this manager leads now)", errLeaderChanged))
			return
		}
		lctx, lcancel := context.WithTimeout(ctx, leaderPoll)
		u, err := m.leaderURL(lctx)
		lcancel()
		if err == nil && u.String() != target.String() {
			cancel(fmt.Errorf("%w (%s leads now)", errLeaderChanged, u))
			return
		}
	}
}

// headerSignal calls got once a response's headers came from the leader.
type headerSignal struct {
	http.RoundTripper
	got func()
}

func (h headerSignal) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.RoundTripper.RoundTrip(r)
	if err == nil {
		h.got()
	}
	return resp, err
}
