package gcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"google.golang.org/api/googleapi"

	"github.com/berth-ci/berth/provider"
)

// Errors the provider returns, wrapped with the details and the API error
// behind them; test them with errors.Is.
var (
	// ErrGroupNotFound: no managed instance group of that name in the
	// zone or region.
	ErrGroupNotFound = errors.New("gcp: managed instance group not found")
	// ErrMaxSize: the group cannot grow past max_size.
	ErrMaxSize = errors.New("gcp: managed instance group is at max_size")
	// ErrPermission: the credentials lack an IAM permission; the message
	// names it.
	ErrPermission = errors.New("gcp: missing IAM permission")
	// ErrCredentials: no usable credentials, or Google refused them.
	ErrCredentials = errors.New("gcp: no valid Google Cloud credentials")
	// ErrThrottled: the API kept refusing the call for rate or quota
	// (429, or 403 rateLimitExceeded/quotaExceeded) after the provider's
	// retries. It wraps provider.ErrTransient.
	ErrThrottled = errors.New("gcp: API rate or quota exceeded")
	// ErrServer: the API kept failing the call with a server error (5xx:
	// Google's side, not berth's request nor a quota) after the provider's
	// retries. It wraps provider.ErrTransient.
	ErrServer = errors.New("gcp: the Compute Engine API failed with a server error")
	// ErrUnknownInstance: no instance with that ID in the group.
	ErrUnknownInstance = errors.New("gcp: unknown instance")
	// ErrInvalidState: the instance is in a state the call cannot act on.
	ErrInvalidState = errors.New("gcp: instance is in the wrong state")
	// ErrUnsupported: the group cannot suspend, or suspend is not enabled.
	ErrUnsupported = errors.New("gcp: suspend is not supported")
	// ErrOperation: an operation ended with an error.
	ErrOperation = errors.New("gcp: operation failed")
	// ErrUnreachable: the Compute API (or its token endpoint) could not
	// be reached, or answered 5xx. It wraps provider.ErrTransient.
	ErrUnreachable = errors.New("gcp: Compute API unreachable")
)

// Retry schedule for rate and quota refusals: Compute Engine's limits are
// per minute, so the waits grow to seconds; five attempts span about 3 s
// (Group.retryWait doubling), and berth's own loop tries again later.
const (
	retryAttempts = 5
	retryFirst    = 200 * time.Millisecond
)

// transient reports whether an API error may pass by itself: a rate or
// quota refusal (429, or 403 with a rate-limit reason), or a server error
// (500, 502, 503, 504: Google documents them as retryable with backoff,
// https://cloud.google.com/compute/docs/api/how-tos/api-requests-responses#handling_api_errors).
func transient(err error) bool {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return false
	}
	switch ge.Code {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case http.StatusForbidden:
		for _, e := range ge.Errors {
			switch e.Reason {
			case "rateLimitExceeded", "userRateLimitExceeded", "quotaExceeded":
				return true
			}
		}
	}
	return false
}

// retry calls fn until it succeeds, fails for good, or was refused for
// rate retryAttempts times (then the error wraps ErrThrottled and
// provider.ErrTransient). what names the call for errors.
func (g *Group) retry(ctx context.Context, what string, fn func() error) error {
	wait := g.retryWait
	var err error
	for attempt := 1; ; attempt++ {
		if err = fn(); err == nil || !transient(err) {
			return mapErr(what, err)
		}
		if attempt == retryAttempts {
			break
		}
		g.log.Info(refusal(err)+"; retrying", "call", what, "attempt", attempt, "wait", wait, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("gcp: %s: %w (while retrying: %w)", what, ctx.Err(), err)
		case <-time.After(wait):
		}
		wait *= 2
	}
	if serverError(err) {
		return fmt.Errorf("%w: %s failed %d times in a row; berth tries again. If it persists, see Google Cloud's status page: %w: %w",
			ErrServer, what, retryAttempts, provider.ErrTransient, err)
	}
	return fmt.Errorf("%w: %s was refused %d times; berth tries again on its next cycle. If it persists, other tools share the project's Compute API quota: lower their rate or ask for a higher quota: %w: %w",
		ErrThrottled, what, retryAttempts, provider.ErrTransient, err)
}

// serverError reports whether err is an HTTP 5xx from the API: Google's
// failure, which a log line or an error must not call a quota.
func serverError(err error) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code >= 500
}

// refusal names a transient error for the retry's log line.
func refusal(err error) string {
	if serverError(err) {
		return "API call failed with a server error"
	}
	return "API call refused for rate or quota"
}

// permissions names the IAM permission each call needs, for errors.
var permissions = map[string]string{
	"instanceGroupManagers.get":              "compute.instanceGroupManagers.get",
	"instanceGroupManagers.listManaged":      "compute.instanceGroupManagers.get",
	"instanceGroupManagers.resize":           "compute.instanceGroupManagers.update",
	"instanceGroupManagers.deleteInstances":  "compute.instanceGroupManagers.update",
	"instanceGroupManagers.suspendInstances": "compute.instanceGroupManagers.update",
	"instanceGroupManagers.resumeInstances":  "compute.instanceGroupManagers.update",
	"instances.get":                          "compute.instances.get",
	"instances.getGuestAttributes":           "compute.instances.getGuestAttributes",
	"instanceTemplates.get":                  "compute.instanceTemplates.get",
	"machineTypes.get":                       "compute.machineTypes.get",
	"operations.get":                         "compute.zoneOperations.get or compute.regionOperations.get",
}

// mapErr classifies an API error into one of the provider's errors,
// naming what to do.
func mapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	if provider.Unreachable(err) {
		// Checked before the credentials: the token endpoint being down
		// is no reason to change them.
		return fmt.Errorf("%w: %s: %w; berth tries again. Check that the endpoint (Google's, or provider_config's endpoint) is reachable from this host: %w", ErrUnreachable, what, provider.ErrTransient, err)
	}
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		if s := err.Error(); strings.Contains(s, "credentials") || strings.Contains(s, "oauth2") || strings.Contains(s, "token") {
			return fmt.Errorf("%w for %s: set credentials_file, GOOGLE_APPLICATION_CREDENTIALS, or run `gcloud auth application-default login`: %w", ErrCredentials, what, err)
		}
		return fmt.Errorf("gcp: %s: %w", what, err)
	}
	reason := ""
	if len(ge.Errors) > 0 {
		reason = ge.Errors[0].Reason
	}
	switch {
	case ge.Code == http.StatusUnauthorized:
		return fmt.Errorf("%w: Google refused the credentials for %s; refresh them (gcloud auth application-default login) or check credentials_file: %w", ErrCredentials, what, err)
	case ge.Code == http.StatusForbidden && reason != "quotaExceeded":
		perm := permissions[what]
		if perm == "" {
			perm = "the permission the message names"
		}
		return fmt.Errorf("%w: %s is not allowed; grant %s to berth's service account (docs/gcp.md lists the role): %w", ErrPermission, what, perm, err)
	case ge.Code == http.StatusNotFound && strings.HasPrefix(what, "instanceGroupManagers.get"):
		return fmt.Errorf("%w: %s; check name, project and zone/region in provider_config: %w", ErrGroupNotFound, ge.Message, err)
	case ge.Code == http.StatusNotFound && strings.HasPrefix(what, "instances."):
		return fmt.Errorf("%w: %s: %w", ErrUnknownInstance, ge.Message, err)
	case ge.Code == http.StatusBadRequest && reason == "unsupportedOperation":
		return fmt.Errorf("%w: %s; set suspend = false or use a machine type without GPUs and with at most 208 GB of memory: %w", ErrUnsupported, ge.Message, err)
	}
	return fmt.Errorf("gcp: %s: %w", what, err)
}
