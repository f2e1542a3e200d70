package manager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/ha"
	"github.com/berth-ci/berth/jobsource/queue"
	"github.com/berth-ci/berth/store"
)

// This file runs berth as one of several managers sharing a fleet through
// etcd ([ha], docs/ha.md): New connects to etcd and waits; Run campaigns,
// and only the leader opens the provider, restores the fleet from etcd and
// runs the job loops. A standby serves /healthz and /metrics itself and
// forwards the API to the leader (forward.go).

// haState is a manager's part in the election.
type haState struct {
	cli       *clientv3.Client
	store     *ha.Store
	elector   *ha.Elector
	advertise string // this manager's API URL, the campaign value
	// term is the term this manager holds, nil as a standby.
	term atomic.Pointer[ha.Term]
	// leading is set once the fleet of the term runs, and cleared first
	// when the term ends: the API serves locally only while it is set.
	leading atomic.Bool
	// lostFleet is why this manager refuses to lead (ha.IdentityError),
	// nil while the fleet's identity held at its last term.
	lostFleet atomic.Pointer[string]
	// etcd is etcd's last answer about the leader, for /healthz
	// (storewatch.go); watched from watchedSince on.
	etcd         storeWatch
	watchedSince time.Time
}

// errStandby refuses an action of a manager that does not lead.
var errStandby = errors.New("this manager is a standby: only the leader acts on the fleet")

// openHA connects to etcd and opens the shared state, retrying with
// backoff while etcd cannot be reached: managers are often started before
// or with their etcd cluster. /healthz answers 503 with the reason
// meanwhile. A corrupt state is not retried: it needs an operator.
func (m *Manager) openHA(ctx context.Context) error {
	h := m.cfg.HA
	adv, err := advertiseURL(h.AdvertiseURL, m.cfg.Listen, m.tls != nil)
	if err != nil {
		return err
	}
	cli, err := ha.Dial(h)
	if err != nil {
		return err
	}
	st, err := m.openEtcdState(ctx, cli, h.KeyPrefix, h.EtcdEndpoints)
	if err != nil {
		cli.Close()
		return err
	}
	m.ha = &haState{cli: cli, store: st, advertise: adv, watchedSince: time.Now(),
		elector: ha.NewElector(cli, h.KeyPrefix, h.LeaseTTL, adv, m.log)}
	m.store, m.hostKeys = etcdState{st}, etcdHostKeys{cli: cli, prefix: h.KeyPrefix}
	m.log.Info("connected to etcd; standing by until this manager leads", "endpoints", h.EtcdEndpoints,
		"key_prefix", h.KeyPrefix, "state_id", st.ID(), "advertise_url", adv, "lease_ttl", h.LeaseTTL)
	return nil
}

// openEtcdState opens the state in etcd, retrying while etcd cannot be
// reached. A corrupt state is not retried: it needs an operator.
func (m *Manager) openEtcdState(ctx context.Context, cli *clientv3.Client, prefix string, endpoints []string) (st *ha.Store, err error) {
	w := startWait{
		what: "etcd",
		retryable: func(err error) bool {
			var corrupt *ha.CorruptError
			return !errors.As(err, &corrupt)
		},
		why: func(error) string { return fmt.Sprintf("etcd at %v cannot be reached", endpoints) },
	}
	err = m.retryAtStart(ctx, w, func() (err error) {
		known, err := knownFleet(m.cfg.StateDir, FleetIDFile)
		if err != nil {
			return err
		}
		if st, err = ha.OpenKnownStore(ctx, cli, prefix, known); err != nil || known != "" {
			return err
		}
		return RecordFleet(m.cfg.StateDir, FleetIDFile, st.ID())
	}, "endpoints", endpoints)
	if err != nil {
		return nil, fmt.Errorf("ha: %w", err)
	}
	return st, nil
}

// advertiseURL is ha.advertise_url, or the URL of the listen address: a
// wildcard host (":8765", "0.0.0.0:8765") is replaced by the host name,
// which the other managers must resolve.
func advertiseURL(configured, listen string, tls bool) (string, error) {
	if configured != "" {
		return configured, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("ha: cannot derive advertise_url from listen %q: %w; set ha.advertise_url", listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("ha: listen %q names no host and the host name is unknown (%v); set ha.advertise_url", listen, err)
		}
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return (&url.URL{Scheme: scheme, Host: net.JoinHostPort(host, port)}).String(), nil
}

// mayAct says whether this manager may act on the fleet now: always for a
// single manager; under [ha] only while it leads. It asks the state's
// store (ha.Store.Leading): the term is live and etcd showed the election
// key with the revision won within ha.ConfirmAfter (a fenced save counts),
// or shows it now with one linearizable read. That is the check the fleet
// makes before each of its provider calls, with the same proof, so a
// provider call pays at most one etcd read whichever path it takes. A
// leader resumed after a pause longer than its lease (SIGSTOP, a long GC,
// a frozen VM) finds its proof stale, asks etcd and is refused on its
// first attempt, whatever its own timers believe; the refusal stops the
// term's fleet, which ends the term (lead → stepDown → Resign).
func (m *Manager) mayAct(context.Context) error {
	if m.ha == nil {
		return nil
	}
	if m.ha.term.Load() == nil {
		return errStandby
	}
	err := m.ha.store.Leading()
	if errors.Is(err, store.ErrFenced) {
		if f := m.live.Load(); f != nil {
			f.Stop(err)
		}
	}
	return err
}

// queueFence is the built-in queue's fence under [ha]: the current term's
// election key and revision, asked at every leader write of the queue
// (take, start, finish, a log chunk, TakeOver), so that etcd refuses them
// once another manager leads. No term (a standby) or an ended one: not ok,
// and the queue refuses without asking etcd.
func (m *Manager) queueFence() (string, int64, bool) {
	t := m.ha.term.Load()
	if t == nil || t.Context().Err() != nil {
		return "", 0, false
	}
	f := t.Fence()
	return f.Key, f.Rev, true
}

// role is "leader" or "standby" under [ha], "" for a single manager.
func (m *Manager) role() string {
	switch {
	case m.ha == nil:
		return ""
	case m.ha.leading.Load():
		return string(ha.RoleLeader)
	}
	return string(ha.RoleStandby)
}

// campaign leads the fleet once per term won until ctx ends: take charge,
// run the fleet and the job loops until the term or ctx ends, step down,
// campaign again.
func (m *Manager) campaign(ctx context.Context) {
	err := m.ha.elector.Lead(ctx, func(_ context.Context, t *ha.Term) error {
		m.runTerm(ctx, t)
		return nil
	})
	if err != nil && ctx.Err() == nil {
		m.log.Error("campaign ended", "err", err)
	}
}

// runTerm is one term: it fences the state with the term, takes charge of
// the fleet and leads until the term or ctx ends.
func (m *Manager) runTerm(ctx context.Context, t *ha.Term) {
	h := m.ha
	h.term.Store(t)
	h.store.SetFence(t.Fence())
	m.metrics.LeaderChanges.Inc()
	defer func() {
		h.leading.Store(false)
		h.term.Store(nil)
		h.store.SetFence(nil)
		m.metrics.Leader.Set(0)
	}()
	start := time.Now()
	// Before the provider opens or a job is taken: an etcd emptied since
	// the last term is not a new fleet (identity.go).
	err := h.store.CheckIdentity(t.Context())
	if err == nil {
		// Nor is an etcd restored from a snapshot the present (issue 43):
		// its idle instances may run the jobs issued since.
		err = m.queue.CheckPresent(t.Context())
	}
	if err == nil {
		err = m.takeCharge(t.Context())
	}
	h.noteIdentity(err)
	if err != nil {
		var ie *ha.IdentityError
		var pe *queue.PastError
		var rb *ha.RolledBackError
		switch {
		case errors.As(err, &ie):
			m.log.Error("refusing to lead: the fleet's identity is not in etcd; resigning", "want", ie.Want, "found", ie.Found, "err", err)
		case errors.As(err, &pe):
			m.log.Error("refusing to lead: etcd holds the fleet's state from the past (restored from a snapshot?); resigning",
				"etcd_last_job_id", pe.Seq, "highest_job_id_seen", pe.Seen, "err", err)
		case errors.As(err, &rb):
			m.log.Error("refusing to lead: etcd holds the fleet's state from the past (restored from a snapshot?); resigning",
				"etcd_revision", rb.Found, "highest_revision_seen", rb.Seen, "err", err)
		}
		if t.Context().Err() == nil {
			m.log.Error("cannot take charge of the fleet; resigning so that another manager can", "err", err)
			select { // not at once: a provider that always fails must not make the managers spin
			case <-time.After(m.cfg.HA.LeaseTTL):
			case <-ctx.Done():
			}
		}
		return
	}
	h.leading.Store(true)
	m.metrics.Leader.Set(1)
	go m.watchPast(t)
	m.sweepAbandoned(t.Context()) // gitlabledger.go
	m.log.Info("leading: the fleet, the provider and the job sources run here", "took_charge_in", time.Since(start).Round(time.Millisecond),
		"instances", len(m.fleet.Instances()))
	m.lead(ctx, t)
	if err := m.fleet.Err(); err != nil {
		h.noteIdentity(err) // the fleet met etcd's past (ha.RolledBackError) before watchPast did
	}
}

// watchPast ends the term t once etcd turns out to hold the fleet's past
// (restored from a snapshot while this manager leads: the election key
// and its lease may be in the snapshot, so the term goes on): it asks
// every lease_ttl/2, as a leader with no provider call or job start to
// make would not notice otherwise. The fleet stops for good and the term's
// next campaign refuses to lead (runTerm).
func (m *Manager) watchPast(t *ha.Term) {
	tick := time.NewTicker(m.cfg.HA.LeaseTTL / 2)
	defer tick.Stop()
	for {
		select {
		case <-t.Context().Done():
			return
		case <-tick.C:
		}
		err := m.ha.store.CheckIdentity(t.Context())
		if err == nil {
			err = m.queue.CheckPresent(t.Context())
		}
		var pe *queue.PastError
		var rb *ha.RolledBackError
		if errors.As(err, &pe) || errors.As(err, &rb) {
			m.ha.noteIdentity(err)
			m.log.Error("etcd holds the fleet's state from the past (restored from a snapshot?): stepping down", "err", err)
			if f := m.live.Load(); f != nil {
				f.Stop(err)
			}
			return
		}
	}
}
