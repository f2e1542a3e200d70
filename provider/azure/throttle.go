package azure

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/berth-ci/berth/provider"
)

// Long Retry-After. ARM answers a throttled call with 429 and Retry-After,
// and refuses every call sent before it elapsed with a new one ("If you
// send a request before the retry value has elapsed, your request isn't
// processed and a new retry value is returned": "Troubleshooting API
// throttling errors", Azure Virtual Machines docs). azcore's retry policy
// honours it only up to MaxRetryDelay, 60 s by default: above that it
// gives up at once and returns the 429 (azcore v1.24.0
// runtime/policy_retry.go, "Retry-After delay exceeds MaxRetryDelay").
// Left alone, berth would then call again on its next cycle, every few
// seconds, each call refused and pushing the wait further.
//
// retryGate remembers the wait of a final 429 and answers every call
// before it without sending it, with an error that names the time
// (ErrThrottled, transient). ARM counts reads, writes and deletes in
// separate buckets per subscription ("Understand how Azure Resource
// Manager throttles requests": subscription reads, writes and deletes),
// so a wait on writes does not stop listings.
type retryGate struct {
	now func() time.Time

	mu        sync.Mutex
	notBefore map[string]time.Time // by bucket: read, write, delete
}

func newRetryGate(now func() time.Time) *retryGate {
	return &retryGate{now: now, notBefore: map[string]time.Time{}}
}

// bucket is ARM's throttling bucket of a request.
func bucket(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "read"
	case http.MethodDelete:
		return "delete"
	}
	return "write"
}

// Do is the policy: it runs once per call, outside azcore's retries, so it
// sees the 429 the retry policy gave up on.
func (r *retryGate) Do(req *policy.Request) (*http.Response, error) {
	b := bucket(req.Raw().Method)
	now := r.now()
	r.mu.Lock()
	until := r.notBefore[b]
	r.mu.Unlock()
	if now.Before(until) {
		return nil, fmt.Errorf("%w: Azure asked for no %s call before %s (Retry-After, longer than the SDK's retry policy waits); the plugin makes none before then, %s from now: %w",
			ErrThrottled, b, until.UTC().Format(time.RFC3339), until.Sub(now).Round(time.Second), provider.ErrTransient)
	}
	resp, err := req.Next()
	if err != nil || resp.StatusCode != http.StatusTooManyRequests {
		return resp, err
	}
	if d := retryAfter(resp.Header); d > 0 {
		r.mu.Lock()
		r.notBefore[b] = now.Add(d)
		r.mu.Unlock()
	}
	return resp, err
}

// until returns when the bucket of method may be called again, zero when
// it may now.
func (r *retryGate) until(method string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t := r.notBefore[bucket(method)]; r.now().Before(t) {
		return t
	}
	return time.Time{}
}

// retryAfter reads how long a response asks to wait: retry-after-ms or
// x-ms-retry-after-ms in milliseconds, or Retry-After in seconds or as an
// HTTP date, as azcore reads them.
func retryAfter(h http.Header) time.Duration {
	for _, k := range []string{"retry-after-ms", "x-ms-retry-after-ms"} {
		if ms, err := strconv.Atoi(h.Get(k)); err == nil && ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	v := h.Get("Retry-After")
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}
