package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/provider"
)

// initProvider initialises the provider. A transient error (the cloud
// throttled the call, or was briefly unavailable) is retried with backoff
// until it passes or ctx ends, while /healthz answers 503 with the reason:
// before issue 19 three throttled calls at start made `berth run` exit 1.
// Any other error ends the start at once.
func (m *Manager) initProvider(ctx context.Context, name string, s provider.Settings) (info provider.Info, err error) {
	w := startWait{
		what:      fmt.Sprintf("provider %q", name),
		retryable: func(err error) bool { return errors.Is(err, provider.ErrTransient) },
		why:       func(error) string { return fmt.Sprintf("initialising provider %q failed with a transient error", name) },
	}
	err = m.retryAtStart(ctx, w, func() (err error) {
		info, err = m.prov.Init(ctx, s)
		return err
	}, "provider", name)
	return info, err
}

// startWait is one thing berth waits for at start: what it is called in
// the log and in /healthz, which errors may pass, and what failed.
type startWait struct {
	what      string
	retryable func(error) bool
	why       func(error) string
}

// retryAtStart calls try until it succeeds, fails with an error w does not
// retry, or ctx ends; the wait doubles from 1 s up to StartRetryMax. One
// log line per failed attempt (with logArgs). Meanwhile every path of the
// API answers 503 "starting" with the reason, so that an operator (and a
// `berth submit` made too early) sees why berth is not up: a first
// attempt may take as long as the provider's Init timeout.
func (m *Manager) retryAtStart(ctx context.Context, w startWait, try func() error, logArgs ...any) error {
	wait := min(time.Second, m.opts.startRetryMax())
	sh := serveStartupHealth(m.cfg.Listen, m.tls, m.log)
	defer func() { sh.close() }()
	sh.set(fmt.Sprintf("waiting for %s: first attempt under way", w.what))
	for attempt := 1; ; attempt++ {
		err := try()
		if err == nil {
			if attempt > 1 {
				m.log.Info(w.what+" ready after retrying", append(logArgs, "attempts", attempt)...)
			}
			return nil
		}
		if !w.retryable(err) || ctx.Err() != nil {
			return err
		}
		m.log.Warn(w.what+" not ready; retrying", append(logArgs, "attempt", attempt, "next_try_in", wait, "err", err)...)
		sh.set(fmt.Sprintf("%s (attempt %d; next try in %v): %v", w.why(err), attempt, wait, err))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return fmt.Errorf("stopped while waiting for %s: %w", w.what, err)
		}
		wait = min(2*wait, m.opts.startRetryMax())
	}
}

func (o Options) startRetryMax() time.Duration {
	if o.StartRetryMax <= 0 {
		return 30 * time.Second
	}
	return o.StartRetryMax
}

// startupHealth answers while berth waits at start, before the API is
// served: 503 "starting" with the reason, on every path and before any
// token check, as /healthz always is. Without it a request made too
// early met a bare 404 (issue 44).
type startupHealth struct {
	srv *http.Server
	mu  sync.Mutex
	why string
}

// startingAnswer is the body of every answer while berth starts: the
// API's error field, which the CLI prints, and /healthz's fields.
type startingAnswer struct {
	Error    string   `json:"error"`
	Status   string   `json:"status"`
	Problems []string `json:"problems"`
}

// serveStartupHealth listens on addr; when it cannot, berth waits without
// it (the log says why) and nil is returned.
func serveStartupHealth(addr string, tlsCfg *tls.Config, log *slog.Logger) *startupHealth {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Warn("cannot serve /healthz while waiting at start", "listen", addr, "err", err)
		return nil
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	sh := &startupHealth{}
	sh.srv = &http.Server{Handler: http.HandlerFunc(sh.answer), ReadHeaderTimeout: 10 * time.Second}
	go sh.srv.Serve(ln)
	return sh
}

// answer is every path's answer: 503 with the reason berth is not up.
func (sh *startupHealth) answer(w http.ResponseWriter, r *http.Request) {
	sh.mu.Lock()
	why := sh.why
	sh.mu.Unlock()
	if r.URL.Path != "/healthz" {
		// berth's CLI sends the request again (for up to
		// api.MaxRetryWait), so `berth run &` then `berth submit`
		// works; /healthz answers at once for monitors and probes.
		w.Header().Set("Retry-After", "1")
	}
	api.WriteJSON(w, http.StatusServiceUnavailable, startingAnswer{
		Error:  "berth is starting, not serving yet: " + why + "; try again once /healthz answers 200",
		Status: "starting", Problems: []string{why}})
}

func (sh *startupHealth) set(why string) {
	if sh == nil {
		return
	}
	sh.mu.Lock()
	sh.why = why
	sh.mu.Unlock()
}

// close stops the server, so that Run can listen on the address.
func (sh *startupHealth) close() {
	if sh == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = sh.srv.Shutdown(ctx)
}
