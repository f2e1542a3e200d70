package manager

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// /healthz asked etcd who leads inside the request, so it hung for as
// long as etcd did: about 60 s with etcd gone, and again after it came
// back (issue 43). A goroutine asks instead, once a second, and /healthz
// answers at once with the last known state and how old it is.

const (
	// storeCheckEvery is how often the watch asks etcd.
	storeCheckEvery = time.Second
	// storeCheckTimeout bounds one question: etcd frozen (SIGSTOP) or
	// gone makes it wait that long.
	storeCheckTimeout = 2 * time.Second
	// storeStale is the age past which the last answer no longer says
	// etcd is reachable, whatever the question in flight will find.
	storeStale = storeCheckEvery + storeCheckTimeout + 2*time.Second
)

// storeWatch keeps etcd's last answer about the leader, for /healthz.
type storeWatch struct {
	mu sync.Mutex
	// leader is the leader's advertised URL at the last answer.
	leader string
	// answeredAt is when etcd last answered, zero before it ever did.
	answeredAt time.Time
	// lastErr is the last question's failure, nil once one is answered.
	lastErr error
}

// run asks etcd every storeCheckEvery until ctx ends.
func (w *storeWatch) run(ctx context.Context, leader func(context.Context) (string, error)) {
	for {
		qctx, cancel := context.WithTimeout(ctx, storeCheckTimeout)
		l, err := leader(qctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		w.note(l, err, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-time.After(storeCheckEvery):
		}
	}
}

func (w *storeWatch) note(leader string, err error, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.leader, w.answeredAt, w.lastErr = leader, now, nil
		return
	}
	w.lastErr = err
}

// storeHealth is /healthz's view of etcd under [ha].
type storeHealth struct {
	// Status is "ok" while etcd answered within storeStale, else
	// "unreachable"; "unknown" before the first question ended.
	Status string `json:"status"`
	// AgeSeconds is how long ago etcd last answered: the leader reported
	// is as of then. Absent when it never answered since this manager
	// started.
	AgeSeconds *int64 `json:"age_s,omitempty"`
	// Error is the last question's failure.
	Error string `json:"error,omitempty"`
}

// report is the state for /healthz at now, the leader as last known, and
// a problem ("" for none) saying what it means and for how long.
func (w *storeWatch) report(now time.Time, started time.Time) (storeHealth, string, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := storeHealth{Status: "ok"}
	if w.lastErr != nil {
		h.Error = w.lastErr.Error()
	}
	since := started
	if !w.answeredAt.IsZero() {
		age := int64(now.Sub(w.answeredAt) / time.Second)
		h.AgeSeconds = &age
		since = w.answeredAt
	}
	switch {
	case w.answeredAt.IsZero() && w.lastErr == nil:
		h.Status = "unknown"
		return h, w.leader, ""
	case w.lastErr == nil && now.Sub(w.answeredAt) < storeStale:
		return h, w.leader, ""
	}
	h.Status = "unreachable"
	last := "never since this manager started"
	if !w.answeredAt.IsZero() {
		last = w.answeredAt.UTC().Format(time.RFC3339)
	}
	why := "no answer yet"
	if w.lastErr != nil {
		why = w.lastErr.Error()
	}
	return h, w.leader, fmt.Sprintf("etcd unreachable for %s (last answer: %s; %s): this manager can neither lead nor take over, and the leader shown is the last known; check the etcd endpoints and that etcd runs",
		now.Sub(since).Round(time.Second), last, why)
}
