package sim

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
)

func TestConfigJSON(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		base    Config
		want    Config
		wantErr string
	}{
		{
			name: "all keys",
			in: `{"boot_time":"60s","boot_jitter":"15s","listing_lag":"2s",
				"increase_fail_rate":0.05,"never_ready_rate":0.01,
				"mean_time_to_failure":"6h","quota":50,"suspend_latency":"20s",
				"resume_latency":"1m30s","delete_latency":"45s","seed":9,
				"supports_suspend":true,"report_deleted":true}`,
			want: Config{
				BootTime: 60 * time.Second, BootJitter: 15 * time.Second, ListingLag: 2 * time.Second,
				IncreaseFailRate: 0.05, NeverReadyRate: 0.01, MeanTimeToFailure: 6 * time.Hour,
				Quota: 50, SuspendLatency: 20 * time.Second, ResumeLatency: 90 * time.Second,
				DeleteLatency: 45 * time.Second, Seed: 9, SupportsSuspend: true, ReportDeleted: true,
			},
		},
		{
			name: "numbers are seconds",
			in:   `{"boot_time":1.5}`,
			want: Config{BootTime: 1500 * time.Millisecond},
		},
		{
			name: "absent keys keep their values",
			in:   `{"quota":3}`,
			base: Config{BootTime: time.Minute, Seed: 4},
			want: Config{BootTime: time.Minute, Seed: 4, Quota: 3},
		},
		{name: "empty object", in: `{}`},
		{name: "unknown key", in: `{"boot_tme":"60s"}`, wantErr: "boot_tme"},
		{name: "bad duration", in: `{"boot_time":"60"}`, wantErr: `"90s"`},
		{name: "negative duration", in: `{"delete_latency":"-1s"}`, wantErr: "delete_latency"},
		{name: "rate over one", in: `{"increase_fail_rate":1.5}`, wantErr: "increase_fail_rate"},
		{name: "negative quota", in: `{"quota":-1}`, wantErr: "quota"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.base
			err := json.Unmarshal([]byte(tt.in), &got)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				if got != tt.base {
					t.Fatalf("failed decode changed the config to %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestNewPanicsOnInvalidConfig(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted a negative boot time")
		}
	}()
	New(Config{BootTime: -1}, time.Now)
}

func TestInitConfig(t *testing.T) {
	g, _ := newGroup(Config{BootTime: time.Minute})
	info, err := g.Init(ctx, provider.Settings{Config: json.RawMessage(`{"seed":5,"supports_suspend":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := provider.Info{ID: "sim/seed-5", Version: Version, Capabilities: provider.Capabilities{Suspend: true, Disposable: true}}
	if info != want {
		t.Fatalf("Info = %+v, want %+v", info, want)
	}
	if c := g.Config(); c.BootTime != time.Minute || c.Seed != 5 {
		t.Fatalf("Config = %+v; want boot time kept and seed 5", c)
	}
	mustIncrease(t, g, 1)
	if _, err := g.Init(ctx, provider.Settings{Config: json.RawMessage(`{"seed":6}`)}); err == nil {
		t.Fatal("Init changed the config after instances were created")
	}
	if _, err := g.Init(ctx, provider.Settings{}); err != nil {
		t.Fatalf("Init without config after use: %v", err)
	}
}

// TestRegisteredOnWallClock is the path `berth run` takes with
// provider = "sim": the registry's group on the real clock.
func TestRegisteredOnWallClock(t *testing.T) {
	ig, err := provider.New("sim")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ig.Init(ctx, provider.Settings{Config: json.RawMessage(`{"boot_time":"30ms"}`)}); err != nil {
		t.Fatal(err)
	}
	if n, err := ig.Increase(ctx, 2); n != 2 || err != nil {
		t.Fatalf("Increase = %d, %v", n, err)
	}
	states := func() map[string]provider.State {
		m := map[string]provider.State{}
		if err := ig.Update(ctx, func(id string, s provider.State) { m[id] = s }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := states(); m["sim-000001"] != provider.StateCreating || len(m) != 2 {
		t.Fatalf("just after Increase: %v", m)
	}
	deadline := time.Now().Add(10 * time.Second)
	for states()["sim-000002"] != provider.StateRunning {
		if time.Now().After(deadline) {
			t.Fatal("instance never booted on the wall clock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := ig.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrentUse exercises the lock under the race detector, as the
// daemon may call from several goroutines.
func TestConcurrentUse(t *testing.T) {
	g := New(Config{SupportsSuspend: true, DeleteLatency: time.Millisecond}, time.Now)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				switch (w + i) % 4 {
				case 0:
					g.Increase(ctx, 1)
				case 1:
					g.Update(ctx, func(id string, s provider.State) {
						if s == provider.StateRunning && i%3 == 0 {
							g.Decrease(ctx, []string{id})
						}
					})
				case 2:
					for _, in := range g.Instances() {
						g.Heartbeat(ctx, in.ID)
					}
				case 3:
					g.Stats()
					g.NextEventTime()
				}
			}
		})
	}
	wg.Wait()
}
