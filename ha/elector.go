package ha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Role is what a manager is in the election.
type Role string

// The roles /healthz reports.
const (
	RoleLeader  Role = "leader"
	RoleStandby Role = "standby"
)

// ErrLeaseLost is the cause of a term's context when the manager's etcd
// lease ended: it expired (the manager was paused or cut off from etcd for
// longer than the lease TTL) or was revoked.
var ErrLeaseLost = errors.New("the etcd lease of this manager ended (expired or revoked): it is no longer the leader")

// ErrResigned is the cause of a term's context after Resign.
var ErrResigned = errors.New("this manager resigned its leadership")

// campaignRetry is the pause before campaigning again after a session
// could not be made (etcd unreachable): short against a lease TTL, long
// enough not to spin.
const campaignRetry = 500 * time.Millisecond

// Elector campaigns for leadership of the managers sharing an etcd prefix.
// One Elector belongs to one manager; it holds at most one Term at a time.
type Elector struct {
	cli    *clientv3.Client
	prefix string
	ttl    int
	name   string
	log    *slog.Logger

	mu   sync.Mutex
	term *Term
}

// NewElector returns an elector for the managers under prefix (the state's
// prefix; the election lives in its election/ directory). ttl is the lease
// TTL: a leader that stops renewing it is replaced after at most that long.
// name is what other managers see of the leader (its API address).
func NewElector(cli *clientv3.Client, prefix string, ttl time.Duration, name string, log *slog.Logger) *Elector {
	secs := int((ttl + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return &Elector{cli: cli, prefix: prefix + "election/", ttl: secs, name: name, log: log}
}

// Role says whether this manager leads now.
func (e *Elector) Role() Role {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term != nil && e.term.ctx.Err() == nil {
		return RoleLeader
	}
	return RoleStandby
}

// Leader returns the name of the manager that leads now, or "" when none does.
func (e *Elector) Leader(ctx context.Context) (string, error) {
	resp, err := e.cli.Get(ctx, e.prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("ask etcd who leads: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// Campaign blocks until this manager leads, then returns its term. It
// waits as a standby while another manager leads, and starts over with a
// new lease when its own lease ends while it waits (etcd unreachable for
// longer than the TTL). It returns only with ctx's error otherwise.
func (e *Elector) Campaign(ctx context.Context) (*Term, error) {
	for {
		t, err := e.campaignOnce(ctx)
		if err == nil {
			e.mu.Lock()
			e.term = t
			e.mu.Unlock()
			e.log.Info("leading the fleet", "key", t.key, "revision", t.rev, "lease_ttl_s", e.ttl)
			return t, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e.log.Warn("campaign for leadership failed; trying again", "err", err, "retry_in", campaignRetry)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(campaignRetry):
		}
	}
}

// campaignOnce takes a new lease, waits for leadership and checks that
// the lease survived the wait.
func (e *Elector) campaignOnce(ctx context.Context) (*Term, error) {
	// The session outlives ctx: it must last the whole term.
	s, err := concurrency.NewSession(e.cli, concurrency.WithTTL(e.ttl))
	if err != nil {
		return nil, fmt.Errorf("take an etcd lease: %w", err)
	}
	el := concurrency.NewElection(s, e.prefix)
	if err := el.Campaign(whileLeaseLives(ctx, s), e.name); err != nil {
		s.Close()
		if ctx.Err() == nil {
			err = fmt.Errorf("wait for leadership: %w", ErrLeaseLost)
		}
		return nil, err
	}
	// Campaign returns once every older candidacy is gone, even when ours
	// went with its lease during the wait: check that the key still holds.
	resp, err := e.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(el.Key()), "=", el.Rev())).Commit()
	if err != nil || !resp.Succeeded {
		s.Close()
		if err == nil {
			err = ErrLeaseLost
		}
		return nil, fmt.Errorf("confirm leadership: %w", err)
	}
	return newTerm(s, el, e.log), nil
}

// whileLeaseLives returns ctx cancelled as well when the session's lease
// ends. Campaign waits for the deletion of the older candidates' keys,
// watching from the revision it saw; after etcd was wiped (a lost volume)
// that revision lies in the new cluster's future and the deletion never
// comes, so a standby waited for ever with no key of its own in the
// election. Its lease ends with the wipe: that ends the wait, and the
// next campaign starts on the new cluster.
func whileLeaseLives(ctx context.Context, s *concurrency.Session) context.Context {
	wait, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()
		select {
		case <-s.Done():
		case <-wait.Done():
		}
	}()
	return wait
}

// Observe sends the name of each new leader until ctx ends. A standby
// uses it to know where the leader is.
func (e *Elector) Observe(ctx context.Context) (<-chan string, error) {
	s, err := concurrency.NewSession(e.cli, concurrency.WithTTL(e.ttl), concurrency.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("take an etcd lease to observe the election: %w", err)
	}
	in := concurrency.NewElection(s, e.prefix).Observe(ctx)
	out := make(chan string)
	go func() {
		defer close(out)
		defer s.Close()
		for resp := range in {
			if len(resp.Kvs) == 0 {
				continue
			}
			select {
			case out <- string(resp.Kvs[0].Value):
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
