package manager

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/diskfull"
	"github.com/berth-ci/berth/jobsource/queue"
	"github.com/berth-ci/berth/provider/plugin"
	"github.com/berth-ci/berth/scaler"
)

// setupHTTP creates the API token (if absent), loads the submitter tokens
// and the TLS certificate, and decides which Host names are this server.
func (m *Manager) setupHTTP() error {
	var err error
	if m.auth, err = newAuthenticator(m.cfg.StateDir, m.log); err != nil {
		if full := diskfull.Explain(m.cfg.StateDir, err); full != nil {
			return full // the token is the first file written: say what is wrong
		}
		return err
	}
	m.log.Info("API requests need the token in the token file (the CLI of this user finds it there)", "token_file", api.TokenPath(m.cfg.StateDir), "submitters", len(m.auth.subs))
	var certNames []string
	if m.cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(m.cfg.TLSCertFile, m.cfg.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("tls_cert_file %s, tls_key_file %s: %w; give a PEM certificate (chain) and its PEM private key", m.cfg.TLSCertFile, m.cfg.TLSKeyFile, err)
		}
		if leaf, err := x509.ParseCertificate(cert.Certificate[0]); err == nil {
			certNames = leaf.DNSNames
			if time.Now().After(leaf.NotAfter) {
				m.log.Warn("the TLS certificate has expired; clients will refuse it", "file", m.cfg.TLSCertFile, "not_after", leaf.NotAfter)
			}
		}
		m.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	host, _, _ := net.SplitHostPort(m.cfg.Listen)
	m.hosts = newHostPolicy(host, certNames)
	return nil
}

// Handler serves the HTTP API, /metrics and /healthz behind the guard:
// canonical paths, known Host, a bearer token (but for /healthz and
// /metrics) and JSON POSTs.
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	m.queue.Register(mux)
	mux.HandleFunc("GET /api/v1/instances", m.serveInstances)
	mux.HandleFunc("POST /api/v1/instances/delete", m.serveDeleteInstances)
	mux.HandleFunc("POST /api/v1/config/reload", m.serveReload)
	mux.Handle("GET /metrics", m.metrics.Handler())
	mux.HandleFunc("GET /healthz", m.serveHealth)
	m.mountConsole(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %s %s; see /api/v1/jobs, /api/v1/instances, /metrics, /healthz", r.Method, r.URL.Path))
	})
	return &guard{auth: m.auth, hosts: m.hosts, tokenFile: api.TokenPath(m.cfg.StateDir), next: m.forwardStandby(m.withGitLabJobs(mux))}
}

// serveHTTP serves the API on ln (with TLS when configured) until the
// returned server is shut down.
func (m *Manager) serveHTTP(ln net.Listener) *http.Server {
	if m.tls != nil {
		ln = tls.NewListener(ln, m.tls)
	}
	// The limit wraps the TLS listener so that the hook sees the
	// connections the server serves.
	limited := newConnLimit(ln, m.cfg.MaxConnections, m.log)
	ln = limited
	srv := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: apiReadHeaderTimeout,
		IdleTimeout: apiIdleTimeout, ConnState: limited.track}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.log.Error("http server stopped", "err", err)
		}
	}()
	return srv
}

// health is the body of /healthz.
type health struct {
	// Status is "ok" or "degraded".
	Status   string `json:"status"`
	Provider string `json:"provider"`
	// Plugin is the external provider plugin's state; nil for a built-in.
	Plugin *plugin.Health `json:"provider_plugin,omitempty"`
	// CreationError is why the provider could not create instances
	// lately (a quota, a cloud out of capacity); it degrades berth
	// without a 503, since a restart cannot fix it.
	CreationError string `json:"creation_error,omitempty"`
	// Problems say what is wrong and what to do, one entry per problem.
	Problems []string `json:"problems,omitempty"`
	// Role is "leader" or "standby" under [ha]; absent for a single manager.
	Role string `json:"role,omitempty"`
	// Leader is the leading manager's advertised URL under [ha] ("" while
	// none leads), as etcd last said (see Store).
	Leader string `json:"leader,omitempty"`
	// Store is etcd's state as this manager last saw it, with its age,
	// under [ha].
	Store *storeHealth `json:"store,omitempty"`
}

// serveHealth answers 200 {"status": "ok"} while berth can take jobs, else
// 503 {"status": "degraded", "problems": [...]}, so that a monitor notices
// a queue that cannot store jobs before users do.
func (m *Manager) serveHealth(w http.ResponseWriter, r *http.Request) {
	h := health{Status: "ok", Role: m.role()}
	// The provider is opened by the first term won: a standby that never
	// led has none (and must not read it while a term opens it).
	leads := m.ha == nil || m.ha.leading.Load()
	if leads {
		h.Provider = m.info.ID
	}
	if m.ha != nil {
		// A standby is healthy: it is ready to take over. It says where
		// the leader is, or that etcd cannot tell (then it cannot take
		// over either). Both come from the store watch's last answer:
		// asking etcd here made /healthz hang while etcd did.
		st, leader, problem := m.ha.etcd.report(time.Now(), m.ha.watchedSince)
		if problem != "" {
			h.Problems = append(h.Problems, problem)
		}
		h.Store, h.Leader = &st, leader
		if p := m.ha.identityProblem(); p != "" {
			h.Problems = append(h.Problems, p)
		}
	}
	if err := m.queue.Health(); err != nil {
		h.Problems = append(h.Problems, err.Error())
	}
	if p := m.fds.problem(); p != "" {
		h.Problems = append(h.Problems, p)
	}
	if leads {
		for _, s := range m.sources {
			if r, ok := s.src.(readySource); ok && r.Problem() != "" {
				h.Problems = append(h.Problems, r.Problem())
			}
		}
	}
	if leads && m.plugin != nil {
		// A restarting plugin degrades berth but is no reason to restart
		// berth (berth restarts the plugin itself), so the answer stays 200.
		ph := m.plugin.Health()
		h.Plugin = &ph
		if ph.Status != "ok" {
			h.Status = "degraded"
		}
	}
	if f := m.live.Load(); leads && f != nil {
		if h.CreationError = f.IncreaseError(); h.CreationError != "" {
			h.Status = "degraded"
		}
	}
	if len(h.Problems) > 0 {
		h.Status = "degraded"
		api.WriteJSON(w, http.StatusServiceUnavailable, h)
		return
	}
	api.WriteJSON(w, http.StatusOK, h)
}

func (m *Manager) serveInstances(w http.ResponseWriter, r *http.Request) {
	p := api.PrincipalFrom(r.Context())
	views := m.fleet.Instances()
	list := api.InstanceList{Instances: make([]api.Instance, 0, len(views))}
	for _, v := range views {
		in := api.Instance{ID: v.ID, State: v.Phase, UseCount: v.UseCount, CreatedAt: v.Created.UTC(),
			DeleteReason: string(v.DeleteReason),
			Slots: api.SlotCounts{Idle: v.Slots[scaler.SlotIdle], Reserved: v.Slots[scaler.SlotReserved],
				Acquired: v.Slots[scaler.SlotAcquired], Suspended: v.Slots[scaler.SlotSuspended],
				Unavailable: v.Slots[scaler.SlotUnavailable]}}
		if !v.ReadyAt.IsZero() {
			t := v.ReadyAt.UTC()
			in.ReadyAt = &t
		}
		// An environment key is a capability: only its owner learns it.
		if v.Env != "" && (p.Admin || m.ownsEnv(p, v.Env)) {
			in.EnvKeys = []string{v.Env}
		}
		list.Instances = append(list.Instances, in)
	}
	api.WriteJSON(w, http.StatusOK, list)
}

func (m *Manager) ownsEnv(p api.Principal, key string) bool {
	owner, known := m.queue.EnvOwner(key)
	return known && p.Owns(owner)
}

// checkResumeKey is the queue's ResumeCheck: a key is refused at submit
// when this berth did not issue it or holds no such environment now.
func (m *Manager) checkResumeKey(key string) error {
	if err := m.checkEnvKey(key); err != nil {
		return &queue.RequestError{Status: http.StatusBadRequest, Message: err.Error()}
	}
	for _, v := range m.fleet.Instances() {
		if v.Env == key {
			return nil
		}
	}
	if why := m.fleet.EnvLost(key); why != "" {
		return &queue.RequestError{Status: http.StatusGone, Message: fmt.Sprintf(
			"environment %s cannot be resumed: %s; run the job without --resume", key, why)}
	}
	return &queue.RequestError{Status: http.StatusNotFound, Message: fmt.Sprintf(
		"no parked environment %s: it was resumed by a job without --suspend, expired after environment_ttl, or its instance was deleted; see `berth instances` for parked environments, or run the job without --resume", key)}
}
