package local

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The sandbox's SSH port is on the host's loopback, so any local user (and
// any job with network = "host") can connect to it without credentials.
// These bounds keep such connections from exhausting PID 1's descriptors,
// which would end the sandbox and fail its job.
const (
	// maxPendingHandshakes is how many connections may be between accept
	// and authentication at once. berth itself needs a handful (a job, a
	// heartbeat, a recycle); when the table is full the oldest pending
	// connection is closed, so that idle connections cannot hold the
	// table and a flood cannot keep berth's own connection out for long.
	maxPendingHandshakes = 64
	// handshakeTimeout bounds one SSH handshake, authentication included.
	// berth's own take milliseconds.
	handshakeTimeout = 10 * time.Second
	// sandboxNoFile is PID 1's soft RLIMIT_NOFILE, which jobs inherit (they
	// may raise it up to the hard limit). It is set rather than inherited
	// from berth so that the bounds above are known to fit in it.
	sandboxNoFile = 4096
	// acceptBackoffMax caps the wait after a failed accept.
	acceptBackoffMax = time.Second
)

// pending is the table of unauthenticated connections of one SSH server.
type pending struct {
	mu      sync.Mutex
	max     int
	conns   []*pendingConn // in arrival order
	evicted int            // connections closed to make room, since the last log line
	log     *slog.Logger
	logged  time.Time
}

// pendingConn is a connection that notes whether the client has sent
// anything yet: an SSH client (berth) sends its version at once, an idle
// flood does not.
type pendingConn struct {
	net.Conn
	spoke atomic.Bool
}

func (c *pendingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.spoke.Store(true)
	}
	return n, err
}

// talking reports whether the client has sent anything, read or still
// waiting in the socket: under a flood the accept loop runs ahead of the
// goroutines that read.
func (c *pendingConn) talking() bool {
	if c.spoke.Load() {
		return true
	}
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	raw.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	if n > 0 {
		c.spoke.Store(true)
	}
	return n > 0
}

// admit records c as pending, first closing a pending connection when the
// table is full: the oldest that has sent nothing, else the oldest. Call
// done once c has authenticated or failed.
func (p *pending) admit(c net.Conn) *pendingConn {
	pc := &pendingConn{Conn: c}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.conns) >= p.max {
		victim := 0
		for i, x := range p.conns {
			if !x.talking() {
				victim = i
				break
			}
		}
		p.conns[victim].Close()
		p.conns = append(p.conns[:victim], p.conns[victim+1:]...)
		p.evicted++
		if time.Since(p.logged) > 10*time.Second {
			p.log.Warn("too many unauthenticated SSH connections: closing the oldest to make room (someone on the host is flooding this sandbox's port)",
				"max_pending", p.max, "evicted", p.evicted)
			p.logged, p.evicted = time.Now(), 0
		}
	}
	p.conns = append(p.conns, pc)
	return pc
}

// done removes c from the table, if it is still there.
func (p *pending) done(c *pendingConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.conns {
		if x == c {
			p.conns = append(p.conns[:i], p.conns[i+1:]...)
			return
		}
	}
}

// backoff is the wait after an accept error: it doubles from 5 ms up to
// acceptBackoffMax while accept keeps failing and resets after a success.
type backoff struct{ d time.Duration }

func (b *backoff) next() time.Duration {
	if b.d == 0 {
		b.d = 5 * time.Millisecond
	} else if b.d *= 2; b.d > acceptBackoffMax {
		b.d = acceptBackoffMax
	}
	return b.d
}

func (b *backoff) reset() { b.d = 0 }

// acceptLoop calls handle for every accepted connection until ln is
// closed. Any other accept error (EMFILE, ENFILE, ENOBUFS, ECONNABORTED...)
// is temporary for a server that must outlive its clients: the loop waits
// and tries again instead of returning, which would end PID 1.
func acceptLoop(ln net.Listener, log *slog.Logger, handle func(net.Conn)) error {
	var b backoff
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			d := b.next()
			if d == acceptBackoffMax || d == 5*time.Millisecond {
				log.Warn("SSH accept failed; retrying", "err", err, "retry_in", d.String())
			}
			time.Sleep(d)
			continue
		}
		b.reset()
		handle(c)
	}
}

// limitNoFile sets the soft descriptor limit of PID 1, and so of the jobs
// it starts, to sandboxNoFile (or the hard limit, when lower). It uses
// package syscall so that the Go runtime passes the new limit on to
// children instead of restoring the one berth started with.
func limitNoFile() error {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	l.Cur = min(l.Max, sandboxNoFile)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("set RLIMIT_NOFILE to %d: %w", l.Cur, err)
	}
	return nil
}
