// Package console serves berth's web console at /ui/ on the API's
// listener: the fleet over time, the jobs and their live logs, waits and
// cost, the scaling decisions and health.
//
// Security: a browser signs in by posting the API token or a submitter
// token to the login form; the server keeps the token in memory and gives
// the browser a random session cookie (HttpOnly, SameSite=Strict, Secure
// over TLS). Every request authenticates the token again, so a removed
// submitter token ends its sessions. A submitter sees only its own jobs
// and environment keys, as in the API. Every POST carries a CSRF token
// (double-submit for the login form, the session's token afterwards) and a
// same-origin Origin. Nothing but the login form and static assets answers
// without a session. The server in front (the manager's guard) applies the
// API's Host check and canonical paths to /ui/ as well.
//
// The charts are drawn by uPlot (MIT, vendored in assets/ with its
// licence) and fed JSON the server aggregates from a bounded History, so a
// week of data is a few hundred points whatever the fleet's size.
package console

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/scaler"
)

//go:embed assets
var assets embed.FS

// staticFiles are the assets served as they are; they hold no data, so
// they load before sign-in (the login page's style).
var staticFiles = map[string]bool{"app.js": true, "login.js": true, "app.css": true, "uPlot.iife.min.js": true, "uPlot.min.css": true, "uPlot.LICENSE": true}

// Fleet is what the console reads of the fleet; *fleet.Fleet has it.
type Fleet interface {
	Instances() []scaler.InstanceView
	Counts() scaler.Counts
}

// Jobs is what the console reads of the built-in queue; *queue.Queue has it.
type Jobs interface {
	ListFor(p api.Principal, state api.JobState, limit int) ([]api.Job, error)
	Get(id string) (api.Job, error)
}

// Options wire a console to berth.
type Options struct {
	// Authenticate maps a token to its principal (the API's tokens).
	Authenticate func(token string) (api.Principal, bool)
	Fleet        Fleet
	Jobs         Jobs
	// JobAPI serves the API's GET /api/v1/jobs/{id}/log and POST
	// /api/v1/jobs/{id}/cancel for the principal in the request's context;
	// the console hands log and cancel requests to it, so both keep the
	// API's rules.
	JobAPI http.Handler
	// Health returns the body of /healthz.
	Health func() any
	// EnvOwner returns the owner of an environment key, for showing keys
	// only to their owners.
	EnvOwner func(key string) (owner string, known bool)
	// SampleInterval is how often Run samples the fleet (default 5s).
	SampleInterval time.Duration
	Clock          func() time.Time
	Logger         *slog.Logger
}

// Console is the web console.
type Console struct {
	opts     Options
	hist     *History
	sessions *sessions
	static   http.Handler
	pages    *template.Template
	mux      *http.ServeMux
}

// New returns a console; call Run to sample the fleet and mount Handler at /ui/.
func New(o Options) *Console {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SampleInterval <= 0 {
		o.SampleInterval = 5 * time.Second
	}
	sub, _ := fs.Sub(assets, "assets")
	c := &Console{opts: o, hist: NewHistory(), sessions: newSessions(),
		static: http.StripPrefix("/ui/static/", http.FileServerFS(sub)),
		pages:  template.Must(template.ParseFS(assets, "assets/*.html"))}
	c.mux = c.routes()
	return c
}

// History is the console's record, for feeding events.
func (c *Console) History() *History { return c.hist }

// Run samples the fleet until ctx is done.
func (c *Console) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.SampleInterval)
	defer t.Stop()
	for {
		c.hist.Sample(c.opts.Clock(), c.opts.Fleet.Counts())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Handler serves /ui and everything under /ui/.
func (c *Console) Handler() http.Handler { return c.mux }

func (c *Console) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /ui/{$}", c.serveApp)
	mux.HandleFunc("GET /ui/login", c.serveLogin)
	mux.HandleFunc("POST /ui/login", c.login)
	mux.HandleFunc("POST /ui/logout", c.withSession(true, c.logout))
	mux.HandleFunc("GET /ui/static/{name}", func(w http.ResponseWriter, r *http.Request) {
		if !staticFiles[r.PathValue("name")] { // not the page templates, no listing
			http.NotFound(w, r)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		c.static.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /ui/api/fleet", c.withSession(false, c.serveFleet))
	mux.HandleFunc("GET /ui/api/jobs", c.withSession(false, c.serveJobs))
	mux.HandleFunc("GET /ui/api/jobs/{id}/log", c.withSession(false, c.serveLog))
	mux.HandleFunc("POST /ui/api/jobs/{id}/cancel", c.withSession(true, c.cancelJob))
	mux.HandleFunc("GET /ui/api/waits", c.withSession(false, c.serveWaits))
	mux.HandleFunc("GET /ui/api/decisions", c.withSession(false, c.serveDecisions))
	mux.HandleFunc("GET /ui/api/health", c.withSession(false, c.serveHealth))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, http.StatusNotFound, "no such console page "+r.Method+" "+r.URL.Path+"; open /ui/")
	})
	return mux
}

// handler is a console handler that knows who is signed in.
type handler func(w http.ResponseWriter, r *http.Request, ses *session, p api.Principal)

// withSession lets only signed-in requests through, and for changes only
// those with the session's CSRF token from the same origin.
func (c *Console) withSession(change bool, next handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ses, p, ok := c.signedIn(r)
		if !ok {
			api.WriteError(w, http.StatusUnauthorized, "not signed in to the console (or the session expired, or its token was removed): sign in at /ui/login")
			return
		}
		if change {
			tok := r.Header.Get(csrfHeader)
			if tok == "" {
				tok = r.PostFormValue(csrfField)
			}
			if !sameOrigin(r) || !sameToken(tok, ses.csrf) {
				api.WriteError(w, http.StatusForbidden, "this request lacks the console's CSRF token or comes from another site: reload /ui/ and try again")
				return
			}
		}
		next(w, r, ses, p)
	}
}

// securityHeaders keep the console's pages out of frames and scripts from
// anywhere but berth itself.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
}

// serveApp serves the console page to a signed-in browser; others go to
// the login form.
func (c *Console) serveApp(w http.ResponseWriter, r *http.Request) {
	ses, p, ok := c.signedIn(r)
	if !ok {
		http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
		return
	}
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = c.pages.ExecuteTemplate(w, "index.html", map[string]any{"CSRF": ses.csrf, "User": p.Name, "Admin": p.Admin})
}

// serveLogin serves the login form with a fresh CSRF token in a cookie and
// in the form: a page of another site can post a form here but can read
// neither.
func (c *Console) serveLogin(w http.ResponseWriter, r *http.Request) {
	c.loginForm(w, r, http.StatusOK, "")
}

// loginForm serves the form; a page the browser asked for before sign-in
// (its #fragment, which login.js puts in the form's "next") rides along
// in the form, through a failed attempt too.
func (c *Console) loginForm(w http.ResponseWriter, r *http.Request, status int, problem string) {
	tok := randomToken()
	http.SetCookie(w, cookie(r, loginCookie, tok, loginTTL))
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = c.pages.ExecuteTemplate(w, "login.html", map[string]any{"CSRF": tok, "Problem": problem, "Next": pageFragment(r.PostFormValue("next"))})
}

// pageFragment returns next when it is a console page's fragment
// ("#jobs", "#jobs/42"), else "": the redirect after sign-in must stay on
// the console.
func pageFragment(next string) string {
	if len(next) < 2 || len(next) > 100 || next[0] != '#' {
		return ""
	}
	for _, c := range next[1:] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("/_.-", c)) {
			return ""
		}
	}
	return next
}

// login checks the form's CSRF token and the token, then starts a session.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	ck, err := r.Cookie(loginCookie)
	if err != nil || !sameOrigin(r) || !sameToken(r.PostFormValue(csrfField), ck.Value) {
		c.loginForm(w, r, http.StatusForbidden, "The form expired or came from another site: sign in again.")
		return
	}
	tok := r.PostFormValue("token")
	p, ok := c.opts.Authenticate(tok)
	if !ok {
		c.opts.Logger.Info("console sign-in refused: wrong token", "remote", r.RemoteAddr)
		c.loginForm(w, r, http.StatusUnauthorized, "That token is not valid. Use the API token (the api-token file in berth's state directory) or your submitter token.")
		return
	}
	id, _ := c.sessions.create(tok, c.opts.Clock())
	http.SetCookie(w, cookie(r, sessionCookie, id, sessionTTL))
	http.SetCookie(w, cookie(r, loginCookie, "", -1))
	c.opts.Logger.Info("console sign-in", "principal", p.Name, "remote", r.RemoteAddr)
	http.Redirect(w, r, "/ui/"+pageFragment(r.PostFormValue("next")), http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request, _ *session, _ api.Principal) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		c.sessions.remove(ck.Value)
	}
	http.SetCookie(w, cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
