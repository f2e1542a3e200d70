package provider

import (
	"errors"
	"fmt"
	"time"
)

// Quota and capacity refusals, one rule for every cloud: they are
// transient (berth keeps running and asks again later, with the
// provider's backoff) and shown to the operator (a queued job's
// waiting_detail and /healthz's creation_error) in the provider's words,
// which say what the operator can do. A provider's error for them wraps
// ErrQuota or ErrStockout, and ErrTransient: GCP's QUOTA_EXCEEDED and
// ZONE_RESOURCE_POOL_EXHAUSTED, Azure's OperationNotAllowed (quota) and
// AllocationFailed, AWS's VcpuLimitExceeded and InsufficientInstanceCapacity.
var (
	// ErrQuota: a quota of the account (vCPUs, instances) does not allow
	// the instances. Raising the quota or lowering max_size fixes it.
	ErrQuota = errors.New("quota exceeded")
	// ErrStockout: the cloud has no capacity for the instance type where
	// the group runs, now. It passes by itself, or another type, zone or
	// region avoids it.
	ErrStockout = errors.New("out of capacity")
)

// Backoff after a creation failure: a provider answers Increase with the
// failure without calling its cloud until the backoff passes, so that
// berth asking again at once does not spend the API's rate limit on
// requests that fail. It doubles from BackoffFirst up to BackoffMax and
// ends at the first success.
const (
	BackoffFirst = 10 * time.Second
	BackoffMax   = 2 * time.Minute
)

// CreationBackoff is the state of that backoff; the zero value is none.
// It is not safe for concurrent use: the provider guards it with the lock
// its Increase holds.
type CreationBackoff struct {
	until time.Time
	wait  time.Duration
	err   error
}

// Failed starts or doubles the backoff after err.
func (b *CreationBackoff) Failed(now time.Time, err error) {
	b.wait = min(max(b.wait*2, BackoffFirst), BackoffMax)
	b.until, b.err = now.Add(b.wait), err
}

// Active returns the last failure while the backoff lasts, nil after.
func (b *CreationBackoff) Active(now time.Time) error {
	if b.err == nil || !now.Before(b.until) {
		return nil
	}
	return fmt.Errorf("%w (asking again after %s)", b.err, b.until.Format(time.RFC3339))
}

// Wait is the backoff's current length.
func (b *CreationBackoff) Wait() time.Duration { return b.wait }

// Reset ends the backoff after a success.
func (b *CreationBackoff) Reset() { *b = CreationBackoff{} }
