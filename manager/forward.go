package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/ha"
)

// forwardStandby serves next while this manager leads (or runs alone) and
// otherwise forwards the API and the console to the leader, so that the
// CLI, the console and scripts work against any manager. /healthz and
// /metrics are always answered here: they describe this manager. It runs
// behind the guard, so a standby checks the token like the leader (the
// managers share their tokens, docs/ha.md) and the leader checks it again.
func (m *Manager) forwardStandby(next http.Handler) http.Handler {
	if m.ha == nil {
		return next
	}
	tr := m.forwardTransport() // one for every request: connections to the leader are reused
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if m.ha.leading.Load() || !(strings.HasPrefix(p, "/api/") || isConsolePath(p)) {
			next.ServeHTTP(w, r)
			return
		}
		target, err := m.leaderURL(r.Context())
		if err != nil {
			w.Header().Set("Retry-After", "1")
			api.WriteError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		m.forward(w, r, target, tr, next)
	})
}

// leaderURL is the leader's advertised API URL, from etcd; an error while
// no other manager leads (an election under way, or this manager taking
// charge).
func (m *Manager) leaderURL(ctx context.Context) (*url.URL, error) {
	ctx, cancel := context.WithTimeout(ctx, ha.DefaultOpTimeout)
	defer cancel()
	leader, err := m.ha.elector.Leader(ctx)
	if err != nil {
		return nil, fmt.Errorf("this berth is a standby and cannot tell which manager leads: %v; try again, or ask another manager", err)
	}
	if leader == "" || leader == m.ha.advertise {
		return nil, fmt.Errorf("no berth manager leads the fleet yet (an election or a takeover is under way; it takes up to ha.lease_ttl = %s); try again in a few seconds", m.cfg.HA.LeaseTTL)
	}
	u, err := url.Parse(leader)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("the leading manager advertises %q, which is not a URL; set ha.advertise_url on it", leader)
	}
	return u, nil
}

// proxyTo forwards a request to the leader as it came: same method, path,
// query, body and Authorization header. Long requests (a log followed,
// submit --wait) stream through.
func proxyTo(target *url.URL, tr http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
		},
		Transport:     tr,
		FlushInterval: -1, // stream logs as they come
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				// Not passed on: the client may send it again (api.Client does).
				w.Header().Set("Retry-After", "1")
				api.WriteError(w, http.StatusServiceUnavailable, fmt.Sprintf("this berth is a standby and could not reach the leader at %s: %v; try again (a takeover may be under way)", target, err))
				return
			}
			api.WriteError(w, http.StatusBadGateway, fmt.Sprintf("this berth is a standby and lost the leader at %s while forwarding: %v; the request may have reached it: check (berth jobs) before sending it again", target, err))
		},
	}
}

// forwardTransport is the transport to the leader: TLS when the API is
// TLS, with this manager's CAs (the system's); an idle connection is not
// kept long, since the leader may change.
func (m *Manager) forwardTransport() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.IdleConnTimeout = 30 * time.Second
	t.ResponseHeaderTimeout = 0 // forward.go's watch bounds the wait, and knows when a takeover ends it
	return t
}
