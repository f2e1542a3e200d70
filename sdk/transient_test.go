package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

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
