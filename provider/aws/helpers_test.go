package aws

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

	"github.com/berth-ci/berth/internal/awsfake"
	"github.com/berth-ci/berth/provider"
)

// fakeAWS starts a fake AWS region whose group's key pair is a fresh key,
// written to a file for connector.key_path, and gives the SDK static
// credentials through the environment, as a CI job would.
func fakeAWS(t *testing.T, opts awsfake.Options) (*awsfake.Cloud, string) {
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
	keyPath := filepath.Join(t.TempDir(), "berth-ci.pem")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	opts.AuthorizedKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	cloud, err := awsfake.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cloud.Close)
	awsfake.StaticCredentials(t)
	return cloud, keyPath
}

// configFor is the provider_config that points the provider at cloud, with
// extra keys merged in.
func configFor(t *testing.T, cloud *awsfake.Cloud, keyPath string, extra map[string]any) []byte {
	t.Helper()
	cfg := map[string]any{
		"name":      "berth-ci",
		"region":    cloud.Region(),
		"endpoint":  cloud.URL(),
		"ssh_port":  cloud.SSHPort(),
		"connector": map[string]any{"username": "ec2-user", "key_path": keyPath},
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

func newGroup(t *testing.T, cloud *awsfake.Cloud, keyPath string, extra map[string]any) (*Group, provider.Info) {
	t.Helper()
	g := New()
	info, err := g.Init(context.Background(), provider.Settings{Config: configFor(t, cloud, keyPath, extra), StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
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

func count(l map[string]provider.State, s provider.State) int {
	n := 0
	for _, st := range l {
		if st == s {
			n++
		}
	}
	return n
}
