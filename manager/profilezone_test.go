package manager

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/policy"
)

// The core's learned profile counts hours in the zone of the policy period
// that sets target_wait (docs/configuration.md, "The forecast"), so a
// team's hours survive a change of clocks; a file without one counts UTC.
func TestCoreConfigProfileZone(t *testing.T) {
	cfg := config.Default()
	m := &Manager{cfg: cfg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	c, err := m.coreConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.ProfileZone.String() != "UTC" {
		t.Errorf("default policy: profile zone %v, want UTC", c.ProfileZone)
	}
	cfg.Autoscaler.Policies = append(cfg.Autoscaler.Policies, policy.Period{
		Periods: []string{"* 8-18 * * mon-fri"}, Timezone: "America/New_York",
		Policy: policy.Policy{TargetWait: 15 * time.Second},
	})
	if c, err = m.coreConfig(); err != nil {
		t.Skip("no time zone database:", err)
	}
	if c.ProfileZone.String() != "America/New_York" {
		t.Errorf("target_wait in New York: profile zone %v, want America/New_York", c.ProfileZone)
	}
}
