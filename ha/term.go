package ha

import (
	"context"
	"fmt"
	"log/slog"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// Term is one leadership of one manager. Everything the leader runs (the
// scaler, the provider calls, the job sources) runs under Context, which
// ends when the term does; every state write carries Fence.
type Term struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	session *concurrency.Session
	el      *concurrency.Election
	key     string
	rev     int64
}

func newTerm(s *concurrency.Session, el *concurrency.Election, log *slog.Logger) *Term {
	ctx, cancel := context.WithCancelCause(context.Background())
	t := &Term{ctx: ctx, cancel: cancel, session: s, el: el, key: el.Key(), rev: el.Rev()}
	go func() {
		select {
		case <-s.Done():
			// The client gives the lease up once no keepalive answered
			// for its TTL, so this fires within the TTL of etcd going
			// away. The fence covers the gap between etcd expiring the
			// lease and this client noticing.
			log.Warn("lost leadership: the etcd lease ended; stopping all work on the fleet", "key", t.key, "revision", t.rev)
			cancel(ErrLeaseLost)
		case <-ctx.Done():
		}
	}()
	return t
}

// Context ends when the term does; context.Cause says why (ErrLeaseLost,
// ErrResigned).
func (t *Term) Context() context.Context { return t.ctx }

// Fence returns what a Store write must prove during this term.
func (t *Term) Fence() *Fence { return &Fence{Key: t.key, Rev: t.rev, Ctx: t.ctx} }

// Lease returns the etcd lease the term hangs on.
func (t *Term) Lease() int64 { return int64(t.session.Lease()) }

// Resign ends the term cleanly: the context ends first, so nothing acts
// any more, then the election key and the lease are deleted, so a standby
// takes over at once instead of after the TTL.
func (t *Term) Resign(ctx context.Context) error {
	t.cancel(ErrResigned)
	err := t.el.Resign(ctx)
	if cerr := t.session.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("resign leadership (a standby takes over when the lease expires anyway): %w", err)
	}
	return nil
}

// Confirm asks etcd, with a linearizable read, whether this term still
// holds: its election key exists with the revision it won with. A manager
// asks before every provider call and job start, so that one resumed
// after a pause longer than its lease (SIGSTOP, a long GC, a frozen VM)
// does not act on its own stale belief before its client notices the
// lease is gone. A term found gone ends at once with ErrLeaseLost and the
// error wraps ErrFenced.
func (t *Term) Confirm(ctx context.Context) error {
	if t.ctx.Err() != nil {
		return context.Cause(t.ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultOpTimeout)
	defer cancel()
	resp, err := t.session.Client().Get(ctx, t.key)
	if err != nil {
		return fmt.Errorf("confirm leadership with etcd: %w", err)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != t.rev {
		t.cancel(ErrLeaseLost)
		return fmt.Errorf("%w (election key %s is gone)", ErrFenced, t.key)
	}
	return nil
}
