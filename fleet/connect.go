package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
)

// The backoff between attempts at an instance's connection details after
// a transient error: a cloud's burst of 5xx or throttling passes within
// seconds to a minute, and the job may wait instance_acquire_timeout.
const (
	connectRetryFirst = 500 * time.Millisecond
	connectRetryMax   = 15 * time.Second
)

// connect gets the connection details of instance id, to which key's
// booking is bound, and tells the core the job reached it. Within ctx (the
// job's instance_acquire_timeout) it retries a transient error with
// backoff (issue 43: a burst of 5xx on GCP's instances.get failed 4 jobs
// in a row on a healthy instance), and when the instance turns out to be
// going (the provider lists it deleting: the core moved the booking) it
// takes the booking's new instance instead. Any other error fails the
// acquisition, as does a move of a resumed environment's booking (which
// the core never makes).
func (f *Fleet) connect(ctx context.Context, key, id string, state []byte) (Acquisition, error) {
	l := &lostSignal{ch: make(chan struct{})}
	f.mu.Lock()
	f.lost[key] = l
	f.mu.Unlock()
	wait := connectRetryFirst
	for attempt := 1; ; attempt++ {
		ci, err := f.connectInfo(ctx, id)
		if err == nil {
			if derr := f.do(func(c *scaler.Scaler) { err = c.Connected(key, id) }); derr != nil {
				return Acquisition{Key: key, Instance: id}, derr
			}
			if err == nil {
				return Acquisition{Key: key, Instance: id, Connect: ci, State: state, Lost: l.ch, lost: l}, nil
			}
			if !errors.Is(err, scaler.ErrMoved) {
				return Acquisition{Key: key, Instance: id}, err
			}
		} else {
			transient := f.transient(ctx, err)
			if transient {
				f.log.Warn("connection details failed with a transient error; retrying within instance_acquire_timeout",
					"key", key, "id", id, "attempt", attempt, "next_try_in", wait, "err", err)
				if !sleep(ctx, wait) {
					return Acquisition{Key: key, Instance: id}, fmt.Errorf("%w (gave up after %d attempts: %v)", err, attempt, context.Cause(ctx))
				}
				wait = min(2*wait, connectRetryMax)
			} else if errors.Is(err, provider.ErrInstanceGoing) {
				// The cloud is deleting it (AWS: "shutting-down, not
				// running"): the core moves the booking at once.
				_ = f.do(func(c *scaler.Scaler) { c.Going(id, err.Error()) })
			} else {
				// The provider may refuse because the instance is going
				// without saying so: a listing tells the core, which
				// then moves the booking.
				f.relist(ctx)
			}
			if f.holds(key, id) {
				if transient {
					continue
				}
				return Acquisition{Key: key, Instance: id}, err
			}
		}
		if state != nil {
			return Acquisition{}, fmt.Errorf("instance %s of the resumed environment went before its job reached it", id)
		}
		from := id
		if id, err = f.bound(ctx, key); err != nil {
			return Acquisition{Key: key}, fmt.Errorf("instance %s went before the job reached it, and no other was ready: %w", from, err)
		}
		f.log.Info("job moved to another instance before it started", "key", key, "from", from, "to", id)
	}
}

// connectInfo makes one ConnectInfo call, bounded by the call timeout,
// once this manager is confirmed to lead.
func (f *Fleet) connectInfo(ctx context.Context, id string) (provider.ConnectInfo, error) {
	cctx, cancel := context.WithTimeout(ctx, f.opts.CallTimeout)
	defer cancel()
	if err := f.confirm(cctx); err != nil {
		return provider.ConnectInfo{}, fmt.Errorf("get connection details of instance %s: %w", id, err)
	}
	ci, err := f.opts.Provider.ConnectInfo(cctx, id)
	if err != nil {
		return provider.ConnectInfo{}, fmt.Errorf("get connection details of instance %s: %w", id, err)
	}
	return ci, nil
}

// transient reports whether a failed ConnectInfo is worth another attempt:
// the provider says the error may pass (a cloud's 5xx or throttling), or
// the call alone timed out while the job may still wait.
func (f *Fleet) transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil || f.Err() != nil {
		return false
	}
	return errors.Is(err, provider.ErrTransient) || errors.Is(err, context.DeadlineExceeded)
}

// relist asks for a provider listing and waits until the core has seen
// one, for at most the call timeout.
func (f *Fleet) relist(ctx context.Context) {
	f.mu.Lock()
	listed := f.listed
	f.mu.Unlock()
	f.Kick()
	t := time.NewTimer(f.opts.CallTimeout)
	defer t.Stop()
	select {
	case <-listed:
	case <-t.C:
	case <-ctx.Done():
	case <-f.stopped:
	}
}

// holds reports whether key's booking is still bound to instance id.
func (f *Fleet) holds(key, id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.core.Holds(key, id)
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
