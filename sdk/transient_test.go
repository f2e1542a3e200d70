package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/sdk"
)

// throttledPool fails Init as a throttled cloud does.
type throttledPool struct{ pool }

func (p *throttledPool) Init(context.Context, sdk.Settings) (sdk.Info, error) {
	return sdk.Info{}, fmt.Errorf("DescribeAutoScalingGroups was throttled: %w", provider.ErrTransient)
}

// Issue 19: a transient error crosses the plugin protocol as one, so that
// berth retries a plugin's throttled start instead of exiting.
func TestTransientErrorCrossesTheProtocol(t *testing.T) {
	c := connect(t, &throttledPool{})
	_, err := c.Init(context.Background(), sdk.Settings{})
	if !errors.Is(err, provider.ErrTransient) || !strings.Contains(err.Error(), "throttled") {
		t.Fatalf("Init = %v; want provider.ErrTransient with the plugin's message", err)
	}
}

// serverErrorPool fails ConnectInfo as the GCP plugin does after a burst of
// 500s: the error is transient, and the googleapi error inside it carries a
// gRPC status of its own (Internal).
type serverErrorPool struct{ pool }

func (p *serverErrorPool) ConnectInfo(context.Context, string) (sdk.ConnectInfo, error) {
	return sdk.ConnectInfo{}, fmt.Errorf("instances.get failed 5 times: %w: %w", provider.ErrTransient, status.Error(codes.Internal, "googleapi: Error 500"))
}

// Issue 43: a transient error that wraps an error with a gRPC status still
// crosses as transient; it used to cross as that status (Internal), and
// berth failed the job instead of retrying.
func TestTransientErrorWithAStatusInsideCrossesAsTransient(t *testing.T) {
	c := connect(t, &serverErrorPool{})
	_, err := c.ConnectInfo(context.Background(), "i-1")
	if !errors.Is(err, provider.ErrTransient) || !strings.Contains(err.Error(), "Error 500") {
		t.Fatalf("ConnectInfo = %v; want provider.ErrTransient with the plugin's message", err)
	}
}
