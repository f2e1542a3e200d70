package azure

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/internal/azurefake"
	"github.com/berth-ci/berth/provider"
)

// Key files others may read are refused at Init, naming the file and
// the chmod to run, as berth's API token is (issue 44).
func TestInitRefusesKeysOthersMayRead(t *testing.T) {
	f := fakeAzure(t, azurefake.Options{})
	os.Chmod(f.keyPath, 0o644)
	_, err := New().Init(context.Background(), provider.Settings{Config: f.config(t, nil), StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+f.keyPath) || errors.Is(err, provider.ErrTransient) {
		t.Errorf("Init with connector.key_path at mode 0644: %v; want a permanent refusal saying `chmod 600 %s`", err, f.keyPath)
	}
	os.Chmod(f.keyPath, 0o600)

	cert := filepath.Join(t.TempDir(), "sp.pem")
	os.WriteFile(cert, []byte("not read: refused first"), 0o640)
	t.Setenv("AZURE_CLIENT_CERTIFICATE_PATH", cert)
	_, err = New().Init(context.Background(), provider.Settings{Config: f.config(t, nil), StateDir: t.TempDir()})
	if !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), "chmod 600 "+cert) {
		t.Errorf("Init with AZURE_CLIENT_CERTIFICATE_PATH at mode 0640: %v; want a refusal saying `chmod 600 %s`", err, cert)
	}
	t.Setenv("AZURE_CLIENT_CERTIFICATE_PATH", "")
	f.newGroup(t, nil) // at 0600 the key passes
}
