package manager

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/berth-ci/berth/config"
)

// Until berth run campaigns, a config with [ha] is refused before
// anything starts: two managers on their own state files would both
// drive the same instance group.
func TestHAConfigIsRefusedUntilWired(t *testing.T) {
	cfg := config.Default()
	cfg.StateDir = t.TempDir()
	cfg.HA = &config.HA{EtcdEndpoints: []string{"http://127.0.0.1:2379"}, LeaseTTL: config.DefaultLeaseTTL, KeyPrefix: config.DefaultKeyPrefix}
	_, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler), Options{})
	if err == nil || !strings.Contains(err.Error(), "[ha]") || !strings.Contains(err.Error(), "docs/ha.md") {
		t.Fatalf("New with [ha]: %v, want a refusal naming [ha] and docs/ha.md", err)
	}
}
