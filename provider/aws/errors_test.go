package aws

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/berth-ci/berth/provider"
)

func TestMapErr(t *testing.T) {
	opErr := func(service, op, code, msg string) error {
		return &smithy.OperationError{ServiceID: service, OperationName: op, Err: &smithy.GenericAPIError{Code: code, Message: msg}}
	}
	for _, c := range []struct {
		err  error
		kind error
		says string
	}{
		{opErr("EC2", "StopInstances", "UnauthorizedOperation", "You are not authorized to perform this operation. Encoded authorization failure message: ..."), ErrPermission, `add "ec2:StopInstances"`},
		{opErr("Auto Scaling", "EnterStandby", "AccessDenied", "User is not authorized"), ErrPermission, `add "autoscaling:EnterStandby"`},
		{opErr("EC2 Instance Connect", "SendSSHPublicKey", "AccessDeniedException", "denied"), ErrPermission, `add "ec2-instance-connect:SendSSHPublicKey"`},
		{opErr("Auto Scaling", "SetDesiredCapacity", "Throttling", "Rate exceeded"), ErrThrottled, "after the SDK's retries"},
		{opErr("EC2", "DescribeInstances", "RequestLimitExceeded", "Request limit exceeded."), ErrThrottled, "rate limit"},
		{opErr("EC2", "DescribeInstances", "AuthFailure", "AWS was not able to validate the provided access credentials"), ErrCredentials, "refresh them"},
		{opErr("Auto Scaling", "DescribeAutoScalingGroups", "ExpiredToken", "The security token included in the request is expired"), ErrCredentials, "check the profile"},
		{opErr("EC2", "DescribeInstances", "InvalidInstanceID.NotFound", "The instance ID 'i-0123456789abcdef0' does not exist"), ErrUnknownInstance, "i-0123456789abcdef0"},
		{opErr("EC2", "StartInstances", "IncorrectInstanceState", "The instance is not in a state from which it can be started."), ErrInvalidState, "can be started"},
		{opErr("EC2", "StopInstances", "UnsupportedOperation", "The instance does not have an 'ebs' root device type"), ErrUnsupported, "suspend = false"},
		{opErr("Auto Scaling", "SetDesiredCapacity", "ValidationError", "New SetDesiredCapacity value 11 is above max value 10 for the AutoScalingGroup."), ErrMaxSize, "raise the group's MaxSize"},
		{opErr("Auto Scaling", "TerminateInstanceInAutoScalingGroup", "ValidationError", "Currently, desired capacity is 1, min size 1."), ErrMinSize, "MinSize to 0"},
		{errors.New("failed to retrieve credentials: no EC2 IMDS role found"), ErrCredentials, "AWS_PROFILE"},
		{opErr("EC2", "StartInstances", "InsufficientInstanceCapacity", "We currently do not have sufficient m5.large capacity in the Availability Zone you requested (us-east-1a)."), provider.ErrStockout, "asks again later"},
		{opErr("EC2", "StartInstances", "VcpuLimitExceeded", "You have requested more vCPU capacity than your current vCPU limit of 32 allows."), provider.ErrQuota, "higher quota"},
	} {
		got := mapErr(c.err)
		if !errors.Is(got, c.kind) || !strings.Contains(got.Error(), c.says) {
			t.Errorf("mapErr(%v) = %v; want %v saying %q", c.err, got, c.kind, c.says)
		}
		if quota := errors.Is(got, provider.ErrQuota) || errors.Is(got, provider.ErrStockout); quota != errors.Is(got, provider.ErrTransient) && c.kind != ErrThrottled {
			t.Errorf("mapErr(%v): quota or stockout %v, transient %v; want both or neither (provider.ErrQuota's rule)", c.err, quota, !quota)
		}
		if !errors.Is(got, c.err) {
			t.Errorf("mapErr(%v) does not wrap the AWS error", c.err)
		}
	}
	if mapErr(nil) != nil {
		t.Error("mapErr(nil) is not nil")
	}
}

// A 5xx from AWS (here on the connection details' DescribeInstances) is
// named as AWS's failure, transient, and neither a throttle, a quota nor an
// unreachable endpoint (issue 43, item 6); a 503 that says
// RequestLimitExceeded stays a throttle.
func TestServerErrorIsNamed(t *testing.T) {
	resp := func(status int, code string) error {
		return &smithy.OperationError{ServiceID: "EC2", OperationName: "DescribeInstances", Err: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      &smithy.GenericAPIError{Code: code, Message: "We encountered an internal error. Please try again."},
		}}
	}
	for _, status := range []int{500, 502, 503, 504} {
		got := mapErr(resp(status, "InternalError"))
		if !errors.Is(got, ErrServer) || !errors.Is(got, provider.ErrTransient) || !strings.Contains(got.Error(), fmt.Sprint(status)) {
			t.Errorf("mapErr(HTTP %d) = %v; want ErrServer, transient, naming the status", status, got)
		}
		for _, wrong := range []error{ErrThrottled, ErrUnreachable, provider.ErrQuota} {
			if errors.Is(got, wrong) {
				t.Errorf("mapErr(HTTP %d) = %v; it is not %v", status, got, wrong)
			}
		}
		for _, word := range []string{"rate", "quota", "reachable"} {
			if strings.Contains(strings.ToLower(got.Error()), word) {
				t.Errorf("mapErr(HTTP %d) = %q; it says %q", status, got, word)
			}
		}
	}
	if got := mapErr(resp(503, "RequestLimitExceeded")); !errors.Is(got, ErrThrottled) || errors.Is(got, ErrServer) {
		t.Errorf("mapErr(503 RequestLimitExceeded) = %v; want ErrThrottled", got)
	}
}
