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
func (m *Manager) initProvider(ctx context.Context, name string, s provider.Settings) (provider.Info, error) {
	wait := min(time.Second, m.opts.startRetryMax())
	var sh *startupHealth
	defer func() { sh.close() }()
	for attempt := 1; ; attempt++ {
		info, err := m.prov.Init(ctx, s)
		if err == nil {
			if attempt > 1 {
				m.log.Info("provider initialised after retrying", "provider", name, "attempts", attempt)
			}
			return info, nil
		}
		if !errors.Is(err, provider.ErrTransient) {
			return provider.Info{}, err
		}
		why := fmt.Sprintf("initialising provider %q failed with a transient error (attempt %d; next try in %v): %v", name, attempt, wait, err)
		m.log.Warn("provider not ready; retrying", "provider", name, "attempt", attempt, "next_try_in", wait, "err", err)
		if sh == nil {
			sh = serveStartupHealth(m.cfg.Listen, m.tls, m.log)
		}
		sh.set(why)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return provider.Info{}, fmt.Errorf("stopped while waiting for provider %q: %w", name, err)
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

// startupHealth answers /healthz while berth waits for its provider at
// start, before the API is served: 503 with the reason.
type startupHealth struct {
	srv *http.Server
	mu  sync.Mutex
	why string
}

// serveStartupHealth listens on addr; when it cannot, berth waits without
// it (the log says why) and nil is returned.
func serveStartupHealth(addr string, tlsCfg *tls.Config, log *slog.Logger) *startupHealth {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Warn("cannot serve /healthz while waiting for the provider", "listen", addr, "err", err)
		return nil
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	sh := &startupHealth{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		sh.mu.Lock()
		why := sh.why
		sh.mu.Unlock()
		api.WriteJSON(w, http.StatusServiceUnavailable, health{Status: "starting", Problems: []string{why}})
	})
	sh.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go sh.srv.Serve(ln)
	return sh
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
