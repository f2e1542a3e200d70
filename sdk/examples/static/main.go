// Command berth-provider-static is the minimal provider plugin of
// docs/plugins.md: a fixed pool of machines you already run, reached over SSH.
// Increase hands out free machines, Decrease takes them back. It cannot
// know the machines' host keys, so berth trusts each key on first use and
// records it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"github.com/berth-ci/berth/sdk"
)

type config struct {
	Hosts          []string `json:"hosts"`            // "10.0.0.5:22", ...
	Username       string   `json:"username"`         // who berth logs in as
	PrivateKeyFile string   `json:"private_key_file"` // that user's key, PEM
}

type static struct {
	cfg  config
	key  []byte
	mu   sync.Mutex
	used map[string]bool // host -> handed out
}

func (s *static) Init(ctx context.Context, set sdk.Settings) (sdk.Info, error) {
	if err := json.Unmarshal(set.Config, &s.cfg); err != nil {
		return sdk.Info{}, fmt.Errorf("static: bad provider_config: %w", err)
	}
	key, err := os.ReadFile(s.cfg.PrivateKeyFile)
	if err != nil {
		return sdk.Info{}, fmt.Errorf("static: private_key_file: %w", err)
	}
	s.key, s.used = key, map[string]bool{}
	return sdk.Info{ID: "static", MaxSize: len(s.cfg.Hosts), Version: "1.0.0"}, nil
}

func (s *static) Update(ctx context.Context, fn func(id string, st sdk.State)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for h := range s.used {
		fn(h, sdk.StateRunning)
	}
	return nil
}

func (s *static) Increase(ctx context.Context, n int) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	done := 0
	for _, h := range s.cfg.Hosts {
		if done < n && !s.used[h] {
			s.used[h] = true
			done++
		}
	}
	if done < n {
		return done, fmt.Errorf("static: only %d free hosts", done)
	}
	return done, nil
}

func (s *static) Decrease(ctx context.Context, ids []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		delete(s.used, id) // deleting a free host is fine: deletes are idempotent
	}
	return ids, nil
}

func (s *static) ConnectInfo(ctx context.Context, id string) (sdk.ConnectInfo, error) {
	if err := s.Heartbeat(ctx, id); err != nil {
		return sdk.ConnectInfo{}, err
	}
	// HostKey left empty: berth trusts the first key it sees and records it.
	return sdk.ConnectInfo{ID: id, Addr: id, Username: s.cfg.Username, PrivateKey: s.key, OS: "linux", Arch: "amd64"}, nil
}

func (s *static) Heartbeat(ctx context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.used[id] {
		return fmt.Errorf("static: %q is not a host in use", id)
	}
	return nil
}

func (s *static) Shutdown(ctx context.Context) error { return nil }

func main() { sdk.Serve(&static{}) }
