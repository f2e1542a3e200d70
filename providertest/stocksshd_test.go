package providertest_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/berth-ci/berth/internal/sshdtest"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/providertest"
)

// The suite passes against a stock OpenSSH server, as on a real AMI: its
// default configuration refuses SSH env requests (AcceptEnv is empty), so
// the SSH check must pass its environment the way the executor does. The
// instances are Debian's sshd, started on a loopback port with OpenSSH's
// compiled-in defaults (-f /dev/null); only the port, the host key and
// the authorized key are given.
func TestConformanceAgainstStockOpenSSH(t *testing.T) {
	srv := sshdtest.Start(t)
	providertest.Run(t, func(*testing.T) provider.InstanceGroup { return &sshdGroup{srv: srv} },
		provider.Settings{StateDir: t.TempDir()})
}

// sshdGroup is a provider whose instances are logins to one stock sshd: it
// hands out as many as asked, as a cloud would, and forgets deleted ones.
type sshdGroup struct {
	srv  *sshdtest.Server
	mu   sync.Mutex
	next int
	live map[string]bool
}

func (g *sshdGroup) Init(context.Context, provider.Settings) (provider.Info, error) {
	g.live = map[string]bool{}
	return provider.Info{ID: "stock-sshd", MaxSize: 10, Version: "test"}, nil
}

func (g *sshdGroup) Update(_ context.Context, fn func(string, provider.State)) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id := range g.live {
		fn(id, provider.StateRunning)
	}
	return nil
}

func (g *sshdGroup) Increase(_ context.Context, n int) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for range n {
		g.next++
		g.live[fmt.Sprintf("sshd-%d", g.next)] = true
	}
	return n, nil
}

func (g *sshdGroup) Decrease(_ context.Context, ids []string) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		delete(g.live, id) // deleting a deleted instance succeeds, as the contract asks
	}
	return ids, nil
}

func (g *sshdGroup) ConnectInfo(_ context.Context, id string) (provider.ConnectInfo, error) {
	if err := g.Heartbeat(context.Background(), id); err != nil {
		return provider.ConnectInfo{}, err
	}
	return provider.ConnectInfo{ID: id, Addr: g.srv.Addr, Username: g.srv.User, HostKey: g.srv.HostKey,
		PrivateKey: g.srv.UserKey, OS: runtime.GOOS, Arch: runtime.GOARCH}, nil
}

func (g *sshdGroup) Heartbeat(_ context.Context, id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.live[id] {
		return fmt.Errorf("unknown instance %s", id)
	}
	return nil
}

func (g *sshdGroup) Shutdown(context.Context) error { return nil }
