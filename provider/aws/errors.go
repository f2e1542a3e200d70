package aws

import (
	"errors"
	"fmt"
	"strings"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/berth-ci/berth/provider"
)

// Errors the provider returns, wrapped with the details and the AWS error
// behind them; test them with errors.Is.
var (
	// ErrGroupNotFound: the Auto Scaling group named in the config does not
	// exist in the region.
	ErrGroupNotFound = errors.New("aws: Auto Scaling group not found")
	// ErrMaxSize: the group cannot grow; its MaxSize is reached.
	ErrMaxSize = errors.New("aws: Auto Scaling group is at its MaxSize")
	// ErrMinSize: removing the instance would take the group below its
	// MinSize.
	ErrMinSize = errors.New("aws: Auto Scaling group is at its MinSize")
	// ErrPermission: the credentials lack an IAM permission; the message
	// names it.
	ErrPermission = errors.New("aws: missing IAM permission")
	// ErrCredentials: no usable credentials, or AWS refused them.
	ErrCredentials = errors.New("aws: no valid AWS credentials")
	// ErrThrottled: AWS kept throttling the call after the SDK's retries.
	ErrThrottled = errors.New("aws: API request rate exceeded")
	// ErrUnknownInstance: no instance with that ID in the group.
	ErrUnknownInstance = errors.New("aws: unknown instance")
	// ErrInvalidState: the instance is in a state the call cannot act on.
	ErrInvalidState = errors.New("aws: instance is in the wrong state")
	// ErrUnsupported: the group cannot suspend, or suspend is not enabled.
	ErrUnsupported = errors.New("aws: suspend is not supported")
	// ErrUnreachable: AWS could not be reached after the SDK's retries.
	// It wraps provider.ErrTransient.
	ErrUnreachable = errors.New("aws: AWS API unreachable")
	// ErrServer: AWS answered, but kept failing the call with a server
	// error (HTTP 5xx other than a throttle: AWS's side, not berth's
	// request, the network nor a rate limit) after the SDK's retries. It
	// wraps provider.ErrTransient (issue 43: a 5xx burst on the
	// connection details was named as something else).
	ErrServer = errors.New("aws: the AWS API failed with a server error")
	// ErrQuota: an EC2 quota (vCPUs, Spot requests) refused the
	// instances; wraps provider.ErrQuota and provider.ErrTransient.
	ErrQuota = fmt.Errorf("aws: instance launch refused: %w", provider.ErrQuota)
	// ErrStockout: EC2 has no capacity for the instance type in the
	// availability zone now; wraps provider.ErrStockout and
	// provider.ErrTransient.
	ErrStockout = fmt.Errorf("aws: instance launch failed: EC2 is %w for the instance type", provider.ErrStockout)
)

// iamPrefix maps the SDK's service IDs to IAM action prefixes.
var iamPrefix = map[string]string{
	"Auto Scaling":         "autoscaling",
	"EC2":                  "ec2",
	"EC2 Instance Connect": "ec2-instance-connect",
}

// mapErr classifies an SDK error into one of the provider's errors, naming
// what to do. Errors it does not recognise are returned with the call's
// name only.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	op, action := "AWS call", ""
	var oe *smithy.OperationError
	if errors.As(err, &oe) {
		op = oe.OperationName
		action = iamPrefix[oe.ServiceID] + ":" + oe.OperationName
	}
	var se *v4.SigningError
	if errors.As(err, &se) || strings.Contains(err.Error(), "retrieve credentials") || strings.Contains(err.Error(), "refresh cached credentials") {
		return fmt.Errorf("%w for %s: set profile in provider_config, AWS_PROFILE, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or give the host an IAM role: %w", ErrCredentials, op, err)
	}
	// After the credentials: a credential chain that found nothing
	// (no instance role off EC2) is a setting to fix, not a wait.
	// A throttled EC2 call answers 503 RequestLimitExceeded: a throttle,
	// which the resume path retries, not an unreachable API.
	var ae smithy.APIError
	var re *smithyhttp.ResponseError
	throttled := errors.As(err, &ae) && throttleCode(ae.ErrorCode())
	if !throttled && errors.As(err, &re) && re.HTTPStatusCode() >= 500 {
		// AWS documents 5xx as its own failure, to be retried
		// ("Error retries and exponential backoff in AWS",
		// https://docs.aws.amazon.com/general/latest/gr/api-retries.html).
		return fmt.Errorf("%w: %s answered HTTP %d even after the SDK's retries; berth tries again. If it persists, see the AWS Health Dashboard: %w: %w", ErrServer, op, re.HTTPStatusCode(), provider.ErrTransient, err)
	}
	if !throttled && provider.Unreachable(err) {
		return fmt.Errorf("%w: %s: %w; berth tries again. Check that the endpoint (AWS's, or provider_config's endpoint) is reachable from this host: %w", ErrUnreachable, op, provider.ErrTransient, err)
	}
	if !errors.As(err, &ae) {
		return fmt.Errorf("aws: %s: %w", op, err)
	}
	code, msg := ae.ErrorCode(), ae.ErrorMessage()
	switch {
	case code == "AccessDenied" || code == "AccessDeniedException" || code == "UnauthorizedOperation" || strings.HasSuffix(code, ".Unauthorized"):
		return fmt.Errorf("%w: %s is not allowed (%s); add %q to the IAM policy of the role or user berth runs as (docs/aws.md lists them all): %w", ErrPermission, op, code, action, err)
	case code == "InvalidClientTokenId" || code == "SignatureDoesNotMatch" || code == "ExpiredToken" || code == "MissingAuthenticationToken" || code == "AuthFailure" || code == "UnrecognizedClientException":
		return fmt.Errorf("%w: AWS refused the credentials for %s (%s); refresh them or check the profile: %w", ErrCredentials, op, code, err)
	case throttled:
		return fmt.Errorf("%w: %s was throttled even after the SDK's retries; berth tries again on its next cycle. If it persists, other tools share the account's rate limit: lower their rate or ask AWS for a higher limit: %w: %w", ErrThrottled, op, provider.ErrTransient, err)
	case code == "VcpuLimitExceeded" || code == "InstanceLimitExceeded" || code == "MaxSpotInstanceCountExceeded":
		// EC2 API reference, "Error codes": a quota; transient by the
		// rule of provider.ErrQuota.
		return fmt.Errorf("%w: %s: %s (%s); ask for a higher quota (Service Quotas, EC2) or lower max_instances; berth asks again later: %w: %w", ErrQuota, op, msg, code, provider.ErrTransient, err)
	case code == "InsufficientInstanceCapacity" || code == "InsufficientCapacity":
		return fmt.Errorf("%w: %s: %s (%s); wait, or give the group more instance types or subnets; berth asks again later: %w: %w", ErrStockout, op, msg, code, provider.ErrTransient, err)
	case code == "InvalidInstanceID.NotFound" || code == "InvalidInstanceID.Malformed" || code == "EC2InstanceNotFoundException":
		return fmt.Errorf("%w: %s: %s: %w", ErrUnknownInstance, op, msg, err)
	case code == "IncorrectInstanceState" || code == "EC2InstanceStateInvalidException":
		return fmt.Errorf("%w: %s: %s: %w", ErrInvalidState, op, msg, err)
	case code == "UnsupportedOperation" || code == "UnsupportedHibernationConfiguration":
		return fmt.Errorf("%w: %s: %s; instances with instance-store root volumes or one-time Spot cannot be stopped: set suspend = false: %w", ErrUnsupported, op, msg, err)
	case code == "ValidationError" && strings.Contains(msg, "above max"):
		return fmt.Errorf("%w: %s: %s; raise the group's MaxSize or lower berth's max_instances: %w", ErrMaxSize, op, msg, err)
	case code == "ValidationError" && (strings.Contains(msg, "min size") || strings.Contains(msg, "below min")):
		return fmt.Errorf("%w: %s: %s; set the group's MinSize to 0 so berth alone decides how many instances run: %w", ErrMinSize, op, msg, err)
	case code == "ValidationError" && strings.Contains(msg, "AutoScalingGroup name not found"):
		return fmt.Errorf("%w: %s: %s; check name and region in provider_config: %w", ErrGroupNotFound, op, msg, err)
	}
	return fmt.Errorf("aws: %s: %w", op, err)
}

// throttleCode reports whether an AWS error code says the call was
// throttled (EC2's RequestLimitExceeded, Auto Scaling's Throttling).
func throttleCode(code string) bool {
	return code == "Throttling" || code == "ThrottlingException" || code == "RequestLimitExceeded" || code == "TooManyRequestsException"
}
