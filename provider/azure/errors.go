package azure

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/berth-ci/berth/provider"
)

// Errors the provider returns, wrapped with the details and the Azure
// error behind them; test them with errors.Is.
var (
	// ErrScaleSetNotFound: the subscription, resource group or scale set
	// named in the config does not exist.
	ErrScaleSetNotFound = errors.New("azure: scale set not found")
	// ErrMaxSize: the set cannot grow; max_size or the platform's limit
	// is reached.
	ErrMaxSize = errors.New("azure: scale set is at its maximum size")
	// ErrQuota: a vCPU quota refused to grow the set (409
	// OperationNotAllowed); wraps provider.ErrQuota and, by its rule,
	// provider.ErrTransient.
	ErrQuota = fmt.Errorf("azure: %w", provider.ErrQuota)
	// ErrStockout: Azure has no capacity for the VM size now
	// (AllocationFailed and the like), to create instances or to start a
	// deallocated one; wraps provider.ErrStockout and provider.ErrTransient.
	ErrStockout = fmt.Errorf("azure: the region is %w for the VM size", provider.ErrStockout)
	// ErrPermission: the identity lacks an RBAC action; the message names it.
	ErrPermission = errors.New("azure: missing RBAC permission")
	// ErrCredentials: no usable credentials, or Azure refused them.
	ErrCredentials = errors.New("azure: no valid Azure credentials")
	// ErrThrottled: Azure kept throttling the call after the SDK's retries.
	ErrThrottled = errors.New("azure: API request rate exceeded")
	// ErrServer: Azure answered, but kept failing the call with a server
	// error (HTTP 5xx: Azure's side, not berth's request, the network nor a
	// rate limit) after the SDK's retries. It wraps provider.ErrTransient
	// (issue 43: a 5xx burst on the connection details was named as
	// something else).
	ErrServer = errors.New("azure: the Azure API failed with a server error")
	// ErrUnknownInstance: no instance with that ID in the set.
	ErrUnknownInstance = errors.New("azure: unknown instance")
	// ErrInvalidState: the instance is in a state the call cannot act on.
	ErrInvalidState = errors.New("azure: instance is in the wrong state")
	// ErrUnsupported: the set cannot be driven this way, or suspend is
	// not enabled.
	ErrUnsupported = errors.New("azure: not supported")
)

var rbacAction = regexp.MustCompile(`perform action '([^']+)'`)

// mapErr classifies an SDK error into one of the provider's errors, naming
// what to do. Errors it does not recognise are returned with the call's
// name only.
func (g *Group) mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var authErr *azidentity.AuthenticationFailedError
	// No credential of the chain applies: azidentity's error type for it
	// is unexported, but its message names the chain.
	unavailable := strings.Contains(err.Error(), "DefaultAzureCredential") || strings.Contains(err.Error(), "failed to acquire a token")
	if (errors.As(err, &authErr) || unavailable) && tokenUnreachable(err) {
		return fmt.Errorf("azure: %s: the token endpoint could not be reached; berth tries again: %w: %w", op, provider.ErrTransient, err)
	}
	if errors.As(err, &authErr) || unavailable {
		return fmt.Errorf("%w for %s: set AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET (a service principal), give the host a managed identity, or log in with az login: %w", ErrCredentials, op, err)
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode >= 500 {
		// Azure documents 5xx as its own failure, to be retried
		// ("Retry guidance for Azure services",
		// https://learn.microsoft.com/en-us/azure/architecture/best-practices/retry-service-specific).
		return fmt.Errorf("%w: %s answered HTTP %d (%s) even after the SDK's retries; berth tries again. If it persists, see Azure's status page: %w: %w", ErrServer, op, re.StatusCode, re.ErrorCode, provider.ErrTransient, err)
	}
	if provider.Unreachable(err) {
		return fmt.Errorf("azure: %s: Azure could not be reached after the SDK's retries; berth tries again: %w: %w", op, provider.ErrTransient, err)
	}
	if !errors.As(err, &re) {
		return fmt.Errorf("azure: %s: %w", op, err)
	}
	code := re.ErrorCode
	switch {
	case re.StatusCode == http.StatusUnauthorized || code == "InvalidAuthenticationToken" || code == "AuthenticationFailed" || code == "ExpiredAuthenticationToken":
		return fmt.Errorf("%w: Azure refused the token for %s (%s); check the tenant and the service principal: %w", ErrCredentials, op, code, err)
	case code == "AuthorizationFailed" || code == "LinkedAuthorizationFailed" || re.StatusCode == http.StatusForbidden:
		action := "the action"
		if m := rbacAction.FindStringSubmatch(err.Error()); m != nil {
			action = fmt.Sprintf("%q", m[1])
		}
		return fmt.Errorf("%w: %s is not allowed (%s); add %s to the role assigned to berth's identity on the scale set (docs/azure.md lists them all): %w", ErrPermission, op, code, action, err)
	case re.StatusCode == http.StatusTooManyRequests:
		when := "berth tries again on its next cycle"
		if re.RawResponse != nil && re.RawResponse.Request != nil {
			if t := g.gate.until(re.RawResponse.Request.Method); !t.IsZero() {
				when = fmt.Sprintf("Azure asked for no call before %s (Retry-After %s, longer than the SDK waits), and the plugin makes none before then",
					t.UTC().Format(time.RFC3339), retryAfter(re.RawResponse.Header))
			}
		}
		return fmt.Errorf("%w: %s was throttled even after the SDK's retries; %s. If it persists, other tools share the subscription's rate limit: %w: %w", ErrThrottled, op, when, provider.ErrTransient, err)
	case code == "ResourceNotFound" || code == "ResourceGroupNotFound" || code == "SubscriptionNotFound" || code == "ParentResourceNotFound":
		return fmt.Errorf("%w: %s (%s): check subscription_id, resource_group and name in provider_config: %w", ErrScaleSetNotFound, op, code, err)
	case code == "NotFound" || (code == "InvalidParameter" && strings.Contains(err.Error(), "not an active")):
		return fmt.Errorf("%w: %s: %w", ErrUnknownInstance, op, err)
	case code == "OperationNotAllowed" && strings.Contains(strings.ToLower(err.Error()), "quota"):
		// Transient, as on every cloud (provider.ErrQuota): a quota
		// can be raised while berth runs.
		return fmt.Errorf("%w: %s: ask for a higher vCPU quota for the VM family in the region (Quotas in the portal, or az quota), or lower max_size; berth asks again later: %w: %w", ErrQuota, op, provider.ErrTransient, err)
	case capacityKind(code) == ErrStockout:
		return fmt.Errorf("%w: %s: Azure has no capacity for the VM size now (for Spot, none at the price); berth tries again later: %w: %w", ErrStockout, op, provider.ErrTransient, err)
	case code == "InvalidParameter" && strings.Contains(err.Error(), "sku.capacity"):
		return fmt.Errorf("%w: %s: %w", ErrMaxSize, op, err)
	case code == "OperationNotAllowed" || code == "Conflict":
		return fmt.Errorf("%w: %s: %w", ErrInvalidState, op, err)
	}
	return fmt.Errorf("azure: %s: %w", op, err)
}

// deref returns *p, or def when p is nil.
func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// codeOf is the ARM error code behind err, "" when there is none.
func codeOf(err error) string {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

// unreachableWords are how azidentity's chain and MSAL spell a network
// failure: they format the transport's error into their message rather
// than wrap it, so provider.Unreachable cannot always find it.
var unreachableWords = []string{"connect: connection refused", "connection reset by peer", "i/o timeout", "TLS handshake timeout"}

// tokenUnreachable reports whether a credential error is the token
// endpoint (Entra ID, the managed identity endpoint) not answering: that
// passes, unlike a secret Azure refuses, so it is transient, not
// ErrCredentials, which makes berth exit at start.
func tokenUnreachable(err error) bool {
	if provider.Unreachable(err) {
		return true
	}
	msg := err.Error()
	for _, w := range unreachableWords {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}
