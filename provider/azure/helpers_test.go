package azure

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

	"github.com/berth-ci/berth/internal/azurefake"
	"github.com/berth-ci/berth/provider"
)

// fake is a fake Azure subscription with the files the provider's config
// names: the OS profile's private key and the fake's CA certificate.
type fake struct {
	*azurefake.Cloud
	keyPath, caPath string
}

// fakeAzure starts a fake Azure subscription whose scale set's OS profile
// holds a fresh key, and gives the default credential chain a service
// principal through the environment, as a CI job would. The set is
// created as docs/azure.md asks, overprovisioning off.
func fakeAzure(t *testing.T, opts azurefake.Options) *fake {
	t.Helper()
	opts.NoOverprovision = true
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
	f := &fake{keyPath: filepath.Join(dir, "berth-ci.pem"), caPath: filepath.Join(dir, "ca.pem")}
	if err := os.WriteFile(f.keyPath, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	opts.AuthorizedKey = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshPub)))
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	cloud, err := azurefake.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cloud.Close)
	f.Cloud = cloud
	if err := os.WriteFile(f.caPath, cloud.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	servicePrincipal(t, cloud.Options())
	return f
}

// servicePrincipal makes the default chain find a client secret in the
// environment and nothing else on this machine.
func servicePrincipal(t *testing.T, o azurefake.Options) {
	t.Setenv("AZURE_TENANT_ID", o.TenantID)
	t.Setenv("AZURE_CLIENT_ID", o.ClientID)
	t.Setenv("AZURE_CLIENT_SECRET", o.ClientSecret)
	t.Setenv("AZURE_AUTHORITY_HOST", "")
	t.Setenv("AZURE_SUBSCRIPTION_ID", "")
	t.Setenv("AZURE_CONFIG_DIR", t.TempDir()) // no Azure CLI login
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", "")
	t.Setenv("IDENTITY_ENDPOINT", "")
	t.Setenv("MSI_ENDPOINT", "")
}

// config is the provider_config that points the provider at the fake,
// with extra keys merged in.
func (f *fake) config(t *testing.T, extra map[string]any) []byte {
	t.Helper()
	o := f.Options()
	cfg := map[string]any{
		"subscription_id": o.Subscription,
		"resource_group":  o.ResourceGroup,
		"name":            o.ScaleSet,
		"endpoint":        f.URL(),
		"authority_host":  f.URL(),
		"ca_file":         f.caPath,
		"ssh_port":        f.SSHPort(),
		"connector":       map[string]any{"key_path": f.keyPath},
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

func (f *fake) newGroup(t *testing.T, extra map[string]any) (*Group, provider.Info) {
	t.Helper()
	g := New()
	info, err := g.Init(context.Background(), provider.Settings{Config: f.config(t, extra), StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() { g.Shutdown(context.Background()) })
	return g, info
}

// listing returns the set's listing as a map.
func listing(t *testing.T, g *Group) map[string]provider.State {
	t.Helper()
	got := map[string]provider.State{}
	if err := g.Update(context.Background(), func(id string, s provider.State) { got[id] = s }); err != nil {
		t.Fatalf("Update: %v", err)
	}
	return got
}
