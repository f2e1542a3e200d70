package manager

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/berth-ci/berth/config"
)

// API server timeouts. /healthz needs no token, so anyone who can reach
// the port can open connections; without these an idle keep-alive
// connection would hold one of berth's descriptors for ever.
const (
	// apiReadHeaderTimeout bounds reading a request's headers.
	apiReadHeaderTimeout = 10 * time.Second
	// apiIdleTimeout closes a keep-alive connection with no request.
	apiIdleTimeout = 60 * time.Second
)

// connLimit is a listener that keeps at most max client connections open.
// When a new connection arrives at the limit, the connection that has been
// idle (no request in flight) the longest is closed to make room; only when
// every connection is busy does Accept wait, leaving newcomers in the
// kernel's backlog rather than in berth's descriptor table. Connections are
// tracked through the http.Server's ConnState hook, which must be set to
// connLimit.track.
type connLimit struct {
	net.Listener
	max int
	log *slog.Logger

	mu      sync.Mutex
	conns   map[net.Conn]connInfo
	freed   chan struct{} // a slot may have freed; buffered, 1
	closed  chan struct{}
	once    sync.Once
	evicted int // since the last log line
	logged  time.Time
}

// connInfo is what connLimit knows of one open connection.
type connInfo struct {
	busy  bool      // a request is being served
	since time.Time // when it became idle
}

func newConnLimit(ln net.Listener, max int, log *slog.Logger) *connLimit {
	if max <= 0 {
		max = config.DefaultMaxConnections
	}
	return &connLimit{Listener: ln, max: max, log: log, conns: map[net.Conn]connInfo{},
		freed: make(chan struct{}, 1), closed: make(chan struct{})}
}

// Accept waits for a free slot (making one from an idle connection if need
// be), then for a connection.
func (l *connLimit) Accept() (net.Conn, error) {
	for !l.reserve() {
		select {
		case <-l.freed:
		case <-l.closed:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.conns[c] = connInfo{since: time.Now()}
	l.mu.Unlock()
	return c, nil
}

// reserve reports whether a connection may be accepted now, closing the
// longest-idle one when the limit is reached.
func (l *connLimit) reserve() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) < l.max {
		return true
	}
	var victim net.Conn
	var since time.Time
	for c, in := range l.conns {
		if !in.busy && (victim == nil || in.since.Before(since)) {
			victim, since = c, in.since
		}
	}
	if victim == nil {
		return false
	}
	delete(l.conns, victim)
	victim.Close()
	l.evicted++
	if time.Since(l.logged) > 10*time.Second {
		l.log.Warn("API connection limit reached: closing the longest-idle connections to make room (raise max_connections if these are real clients)",
			"max_connections", l.max, "closed", l.evicted)
		l.logged, l.evicted = time.Now(), 0
	}
	return true
}

// track is the http.Server's ConnState hook.
func (l *connLimit) track(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	in, known := l.conns[c]
	switch {
	case s == http.StateClosed || s == http.StateHijacked:
		delete(l.conns, c)
		select {
		case l.freed <- struct{}{}:
		default:
		}
	case !known:
		// Evicted already; the server will report it closed.
	case s == http.StateActive:
		in.busy = true
		l.conns[c] = in
	case s == http.StateIdle:
		in.busy, in.since = false, time.Now()
		l.conns[c] = in
	}
}

// Close stops Accept, including one waiting for a slot.
func (l *connLimit) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}
