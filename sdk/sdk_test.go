package sdk_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-plugin"

	"github.com/berth-ci/berth/sdk"
)

// pool is a plugin author's group: two fixed instances, no suspend.
type pool struct{ panicOn string }

func (p *pool) Init(_ context.Context, s sdk.Settings) (sdk.Info, error) {
	if string(s.Config) != `{"zone":"a"}` || s.StateDir != "/state" {
		return sdk.Info{}, errors.New("settings did not arrive: " + string(s.Config) + " " + s.StateDir)
	}
	return sdk.Info{ID: "pool/a", MaxSize: 2, Version: "1.2.3", Capabilities: sdk.Capabilities{Suspend: true}}, nil
}

func (p *pool) Update(_ context.Context, fn func(string, sdk.State)) error {
	if p.panicOn == "Update" {
		panic("listing exploded")
	}
	fn("a-1", sdk.StateRunning)
	fn("a-2", sdk.StateCreating)
	return nil
}

func (p *pool) Increase(_ context.Context, n int) (int, error) {
	return 1, errors.New("quota: only 1 more")
}

func (p *pool) Decrease(_ context.Context, ids []string) ([]string, error) { return ids, nil }

func (p *pool) ConnectInfo(_ context.Context, id string) (sdk.ConnectInfo, error) {
	if id != "a-1" {
		return sdk.ConnectInfo{}, errors.New("no instance " + id)
	}
	return sdk.ConnectInfo{ID: id, Addr: "10.0.0.1:22", Username: "ci", PrivateKey: []byte("PEM"), OS: "linux", Arch: "arm64"}, nil
}

func (p *pool) Heartbeat(context.Context, string) error { return nil }
func (p *pool) Shutdown(context.Context) error          { return nil }

// connect serves g in-process over a real gRPC connection and returns the host's client.
func connect(t *testing.T, g sdk.InstanceGroup) *sdk.Client {
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{sdk.PluginName: &sdk.GRPCPlugin{Impl: g}})
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(sdk.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(*sdk.Client)
}

func TestCallsCrossTheProtocolIntact(t *testing.T) {
	c := connect(t, &pool{})
	ctx := context.Background()
	info, err := c.Init(ctx, sdk.Settings{Config: []byte(`{"zone":"a"}`), StateDir: "/state"})
	if err != nil {
		t.Fatal(err)
	}
	// The group claims suspend but does not implement it: berth must not believe the claim.
	if info.ID != "pool/a" || info.MaxSize != 2 || info.Version != "1.2.3" || info.Capabilities.Suspend {
		t.Errorf("Info = %+v; want the group's, without suspend", info)
	}
	var got []string
	if err := c.Update(ctx, func(id string, s sdk.State) { got = append(got, id+"="+string(s)) }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "a-1=running a-2=creating" {
		t.Errorf("listing = %v", got)
	}
	if n, err := c.Increase(ctx, 3); n != 1 || err == nil || err.Error() != "quota: only 1 more" {
		t.Errorf("Increase = %d, %v; want the partial count and the group's error", n, err)
	}
	ci, err := c.ConnectInfo(ctx, "a-1")
	if err != nil || ci.Addr != "10.0.0.1:22" || string(ci.PrivateKey) != "PEM" || ci.Arch != "arm64" || ci.HostKey != "" {
		t.Errorf("ConnectInfo = %+v, %v", ci, err)
	}
	if _, err := c.ConnectInfo(ctx, "zz"); err == nil || err.Error() != "no instance zz" {
		t.Errorf("ConnectInfo(zz) = %v; want the group's error as it is", err)
	}
	if _, err := c.Suspend(ctx, []string{"a-1"}); !errors.Is(err, sdk.ErrSuspendUnsupported) {
		t.Errorf("Suspend on a group without the capability = %v", err)
	}
}

func TestPanicInTheGroupFailsOnlyThatCall(t *testing.T) {
	c := connect(t, &pool{panicOn: "Update"})
	err := c.Update(context.Background(), func(string, sdk.State) {})
	if err == nil || !strings.Contains(err.Error(), "Update panicked in the plugin: listing exploded") {
		t.Fatalf("Update that panics = %v", err)
	}
	if err := c.Heartbeat(context.Background(), "a-1"); err != nil {
		t.Errorf("the plugin did not survive its group's panic: %v", err)
	}
}
