package gcp

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/internal/gcpfake"
	"github.com/berth-ci/berth/provider"
)

// fakeGCP starts a fake project whose template's ssh-keys holds a fresh
// key, written to a file for connector.key_path, and writes the fake's
// service account key file for credentials_file.
func fakeGCP(t *testing.T, opts gcpfake.Options) (*gcpfake.Cloud, string, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "berth-ci.pem")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	opts.AuthorizedKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	cloud, err := gcpfake.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cloud.Close)
	saPath := filepath.Join(dir, "sa.json")
	if err := os.WriteFile(saPath, cloud.ServiceAccountKey(), 0o600); err != nil {
		t.Fatal(err)
	}
	// Nothing on this machine may stand in for the key file.
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "")
	return cloud, keyPath, saPath
}

// configFor is the provider_config that points the provider at cloud,
// with extra keys merged in.
func configFor(t *testing.T, cloud *gcpfake.Cloud, keyPath, saPath string, extra map[string]any) []byte {
	t.Helper()
	zone, region := cloud.Location()
	cfg := map[string]any{
		"name": "berth-ci", "project": cloud.Project(), "endpoint": cloud.URL(), "credentials_file": saPath,
		"ssh_port": cloud.SSHPort(), "connector": map[string]any{"username": "berth", "key_path": keyPath},
	}
	if region != "" {
		cfg["region"] = region
	} else {
		cfg["zone"] = zone
	}
	for k, v := range extra {
		cfg[k] = v
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newGroup(t *testing.T, cloud *gcpfake.Cloud, keyPath, saPath string, extra map[string]any) (*Group, provider.Info) {
	t.Helper()
	g := New()
	info, err := g.Init(context.Background(), provider.Settings{Config: configFor(t, cloud, keyPath, saPath, extra), StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { g.Shutdown(context.Background()) })
	return g, info
}

// listing returns the group's listing as a map.
func listing(t *testing.T, g *Group) map[string]provider.State {
	t.Helper()
	got := map[string]provider.State{}
	if err := g.Update(context.Background(), func(id string, s provider.State) { got[id] = s }); err != nil {
		t.Fatalf("Update: %v", err)
	}
	return got
}
