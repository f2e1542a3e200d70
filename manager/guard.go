package manager

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"os"
	"path"
	"strings"

	"github.com/berth-ci/berth/api"
)

// openPaths answer without a token: they carry no job data, and monitoring
// should not need a secret to ask whether berth is up.
var openPaths = map[string]bool{"/healthz": true, "/metrics": true}

// guard is the gate in front of every endpoint. In order, it refuses:
//
//  1. paths that are not clean ("..", ".", "//"), with a JSON 400 instead of
//     ServeMux's HTML redirect;
//  2. a Host header that names neither this server nor localhost (DNS
//     rebinding: a web page whose name resolves to 127.0.0.1 must not reach
//     the API from a browser);
//  3. requests without a valid bearer token, except GET of openPaths;
//  4. POSTs whose body is not application/json: browsers can send forms
//     and text/plain across origins without asking (CSRF), but not JSON.
type guard struct {
	auth      *authenticator
	hosts     hostPolicy
	tokenFile string
	next      http.Handler
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; p != cleanPath(p) {
		api.WriteError(w, http.StatusBadRequest, fmt.Sprintf("path %q is not in canonical form (it holds \"..\", \".\" or \"//\"): ask for %q, e.g. /api/v1/jobs/ID", p, cleanPath(p)))
		return
	}
	if !g.hosts.allowed(r) {
		api.WriteError(w, http.StatusForbidden, fmt.Sprintf("host %q is not this berth server: use the address berth listens on or localhost (other names are refused so that a web page cannot reach the API through DNS rebinding)", r.Host))
		return
	}
	if isConsolePath(r.URL.Path) { // the console signs browsers in itself (console.go)
		g.next.ServeHTTP(w, r)
		return
	}
	open := openPaths[r.URL.Path] && (r.Method == http.MethodGet || r.Method == http.MethodHead)
	if !open {
		p, ok := g.auth.authenticate(bearerToken(r))
		if !ok {
			g.refuse(w, r)
			return
		}
		r = r.WithContext(api.WithPrincipal(r.Context(), p))
	}
	if r.Method == http.MethodPost {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			api.WriteError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("POST needs \"Content-Type: application/json\" (got %q), also when there is no body; other types are refused so that a web page cannot submit jobs (CSRF)", r.Header.Get("Content-Type")))
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// refuse answers 401 and says how to get a token.
func (g *guard) refuse(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="berth"`)
	what := "this request has no API token"
	if r.Header.Get("Authorization") != "" {
		what = "the API token of this request is not valid (or not in the form \"Authorization: Bearer TOKEN\")"
	}
	api.WriteError(w, http.StatusUnauthorized, fmt.Sprintf("%s: the berth CLI sends the token from --token, $%s or %s when it runs as the user that runs `berth run`; with curl add -H \"Authorization: Bearer $(cat %s)\"", what, api.TokenEnv, g.tokenFile, g.tokenFile))
}

// bearerToken returns the token of an "Authorization: Bearer TOKEN" header.
func bearerToken(r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// cleanPath is path.Clean keeping a trailing slash, as ServeMux cleans
// before it redirects.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// hostPolicy decides which Host headers name this server.
type hostPolicy struct {
	// names are host names (lower case) that mean this server: localhost,
	// the listen host, this machine's host name and the TLS certificate's
	// names.
	names map[string]bool
}

func newHostPolicy(listenHost string, certNames []string) hostPolicy {
	h := hostPolicy{names: map[string]bool{"localhost": true}}
	add := func(n string) {
		n = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(n)), ".")
		if n != "" {
			h.names[n] = true
		}
	}
	add(listenHost)
	if hn, err := os.Hostname(); err == nil {
		add(hn)
	}
	for _, n := range certNames {
		add(n)
	}
	return h
}

// allowed reports whether r's Host names this server. An IP address is
// allowed when it is a loopback address or the one the connection arrived
// on: DNS rebinding needs a name, and a client that dials an address by
// number sends that number.
func (h hostPolicy) allowed(r *http.Request) bool {
	host := r.Host
	if host == "" { // HTTP/1.0 without Host: no browser sends that
		return true
	}
	if hh, _, err := net.SplitHostPort(host); err == nil {
		host = hh
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() {
			return true
		}
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
			if ta, ok := la.(*net.TCPAddr); ok && ta.IP.Equal(ip) {
				return true
			}
		}
		return false
	}
	if h.names[host] {
		return true
	}
	// A wildcard certificate name *.example.com covers one label.
	if _, rest, ok := strings.Cut(host, "."); ok && h.names["*."+rest] {
		return true
	}
	return false
}
