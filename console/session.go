package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/berth-ci/berth/api"
)

// Cookie names. Both cookies are HttpOnly (no script reads them) and
// SameSite=Strict (no other site's page sends them), and Secure over TLS.
const (
	sessionCookie = "berth_session"
	loginCookie   = "berth_login" // the login form's CSRF token, before there is a session
	csrfHeader    = "X-CSRF-Token"
	csrfField     = "csrf"
)

const (
	sessionTTL  = 12 * time.Hour
	loginTTL    = time.Hour
	maxSessions = 10000
)

// session is one signed-in browser. The token is kept so that every
// request authenticates again: removing a submitter's token file ends its
// sessions at once.
type session struct {
	token   string
	csrf    string
	expires time.Time
}

// sessions maps the hash of a session cookie to its session; a memory dump
// or a timing leak of the map does not give cookies away.
type sessions struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]*session
}

func newSessions() *sessions { return &sessions{m: map[[sha256.Size]byte]*session{}} }

// randomToken returns 32 random bytes, URL-safe.
func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create starts a session for token and returns its cookie value.
func (s *sessions) create(token string, now time.Time) (string, *session) {
	id := randomToken()
	ses := &session{token: token, csrf: randomToken(), expires: now.Add(sessionTTL)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= maxSessions {
		s.pruneLocked(now)
	}
	s.m[sha256.Sum256([]byte(id))] = ses
	return id, ses
}

// pruneLocked drops expired sessions, and if that is not enough the one
// that expires first: the map stays bounded whatever logs in.
func (s *sessions) pruneLocked(now time.Time) {
	var oldest [sha256.Size]byte
	var oldestAt time.Time
	for k, v := range s.m {
		if now.After(v.expires) {
			delete(s.m, k)
			continue
		}
		if oldestAt.IsZero() || v.expires.Before(oldestAt) {
			oldest, oldestAt = k, v.expires
		}
	}
	if len(s.m) >= maxSessions {
		delete(s.m, oldest)
	}
}

// get returns the live session of cookie value id.
func (s *sessions) get(id string, now time.Time) *session {
	if id == "" {
		return nil
	}
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	ses := s.m[k]
	if ses != nil && now.After(ses.expires) {
		delete(s.m, k)
		return nil
	}
	return ses
}

func (s *sessions) remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, sha256.Sum256([]byte(id)))
}

// cookie builds one of the console's cookies for r.
func cookie(r *http.Request, name, value string, ttl time.Duration) *http.Cookie {
	c := &http.Cookie{Name: name, Value: value, Path: "/ui/", HttpOnly: true, Secure: r.TLS != nil,
		SameSite: http.SameSiteStrictMode, MaxAge: int(ttl.Seconds())}
	if ttl < 0 {
		c.MaxAge = -1
	}
	return c
}

// signedIn returns the session and principal of r, or false.
func (c *Console) signedIn(r *http.Request) (*session, api.Principal, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, api.Principal{}, false
	}
	ses := c.sessions.get(ck.Value, c.opts.Clock())
	if ses == nil {
		return nil, api.Principal{}, false
	}
	p, ok := c.opts.Authenticate(ses.token)
	if !ok { // the token was revoked
		c.sessions.remove(ck.Value)
		return nil, api.Principal{}, false
	}
	return ses, p, true
}

// sameToken compares two CSRF tokens in constant time.
func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// sameOrigin refuses a request whose Origin (sent by browsers on every
// POST) is another site: a second line behind the CSRF token. The scheme
// is not compared, so that a proxy in front that ends TLS does not lock
// everyone out.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, r.Host)
}
