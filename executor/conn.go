package executor

import (
	"context"
	"crypto/sha256"
	"sync"

	"github.com/berth-ci/berth/provider"
)

// The commands that run on one instance at the same time (several slots per
// instance) share one SSH connection, each in its own session. A connection
// costs berth far more than a session: x/crypto/ssh runs eight goroutines and
// keeps buffers and cipher state per connection, so with ten jobs per
// instance most of what a running job cost was its own connection. The
// connection is closed when its last command ends, so an instance with one
// slot sees one connection per job as before.
//
// OpenSSH allows ten sessions per connection by default (MaxSessions): a
// session the server refuses, like one on a connection that died meanwhile,
// is retried once on a connection of the command's own.

// conn is an SSH connection to an instance and the commands using it.
type conn struct {
	key    string
	client *sshClient
	lost   *lostCause // why keepalive gave up on the connection
	stopKA func()

	ready chan struct{} // closed once dialled; err tells how it went
	err   error
	refs  int  // commands using it; guarded by connPool.mu
	alone bool // not in the pool: closed by its one user
}

// connPool holds the connections in use, by instance.
type connPool struct {
	mu    sync.Mutex
	conns map[string]*conn
}

// connKey identifies an instance and the credentials used on it: two
// instances, or one whose address or keys changed, never share.
func connKey(ci provider.ConnectInfo) string {
	h := sha256.New()
	for _, part := range []string{ci.ID, ci.Addr, ci.Username, ci.HostKey, string(ci.PrivateKey)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return string(h.Sum(nil))
}

// acquire returns a connection to ci, shared with the other commands
// running there. The caller must release it.
func (r *Runner) acquire(ctx context.Context, ci provider.ConnectInfo) (*conn, error) {
	key := connKey(ci)
	p := &r.pool
	p.mu.Lock()
	if p.conns == nil {
		p.conns = map[string]*conn{}
	}
	if c := p.conns[key]; c != nil {
		c.refs++
		p.mu.Unlock()
		select {
		case <-c.ready:
		case <-ctx.Done():
			r.release(c)
			return nil, ctx.Err()
		}
		if c.err == nil && c.lost.get() == nil {
			return c, nil
		}
		// The dial we waited for failed, perhaps only because its own
		// command was canceled, or keepalive gave up on the connection:
		// dial for ourselves.
		r.release(c)
		return r.dialAlone(ctx, ci)
	}
	c := &conn{key: key, refs: 1, ready: make(chan struct{}), lost: &lostCause{}}
	p.conns[key] = c
	p.mu.Unlock()
	r.connect(ctx, ci, c)
	if c.err != nil {
		r.forget(c)
		r.release(c)
		return nil, c.err
	}
	return c, nil
}

// dialAlone returns a connection to ci used by the caller only.
func (r *Runner) dialAlone(ctx context.Context, ci provider.ConnectInfo) (*conn, error) {
	c := &conn{refs: 1, alone: true, ready: make(chan struct{}), lost: &lostCause{}}
	r.connect(ctx, ci, c)
	if c.err != nil {
		return nil, c.err
	}
	return c, nil
}

// connect dials c and starts its keepalive.
func (r *Runner) connect(ctx context.Context, ci provider.ConnectInfo, c *conn) {
	c.client, c.err = r.dial(ctx, ci)
	if c.err == nil {
		c.stopKA = r.keepAlive(c.client, c.lost)
	}
	close(c.ready)
}

// forget takes c out of the pool, so that later commands dial anew; its
// current users keep it until they release it.
func (r *Runner) forget(c *conn) {
	p := &r.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if !c.alone && p.conns[c.key] == c {
		delete(p.conns, c.key)
	}
	c.alone = true
}

// release ends a command's use of c; the last user closes it.
func (r *Runner) release(c *conn) {
	p := &r.pool
	p.mu.Lock()
	c.refs--
	last := c.refs == 0
	if last && !c.alone && p.conns[c.key] == c {
		delete(p.conns, c.key)
	}
	p.mu.Unlock()
	if last && c.client != nil {
		c.stopKA()
		c.client.Close()
	}
}

// shared reports whether other commands use c too.
func (r *Runner) shared(c *conn) bool {
	r.pool.mu.Lock()
	defer r.pool.mu.Unlock()
	return c.refs > 1
}
