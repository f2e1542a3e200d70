package aws

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/internal/awsfake"
	"github.com/berth-ci/berth/provider"
)

// Init against an API that refuses connections fails with a transient
// error, so berth waits for it instead of exiting (issue 44); a refusal
// by the API itself stays permanent.
func TestInitErrorsTransientOnlyWhenTheAPIIsUnreachable(t *testing.T) {
	cloud, keyPath := fakeAWS(t, awsfake.Options{})
	cfg := configFor(t, cloud, keyPath, nil)

	cloud.Deny("DescribeAutoScalingGroups", true)
	_, err := New().Init(context.Background(), provider.Settings{Config: cfg, StateDir: t.TempDir()})
	if !errors.Is(err, ErrPermission) || errors.Is(err, provider.ErrTransient) {
		t.Errorf("Init with DescribeAutoScalingGroups denied: %v; want a permanent ErrPermission", err)
	}

	cloud.Close()
	_, err = New().Init(context.Background(), provider.Settings{Config: cfg, StateDir: t.TempDir()})
	if !errors.Is(err, ErrUnreachable) || !errors.Is(err, provider.ErrTransient) {
		t.Errorf("Init with the API refusing connections: %v; want ErrUnreachable, transient", err)
	}
}

// Key files others may read are refused at Init, naming the file and
// the chmod to run, as berth's API token is (issue 44).
func TestInitRefusesKeysOthersMayRead(t *testing.T) {
	cloud, keyPath := fakeAWS(t, awsfake.Options{})
	cfg := configFor(t, cloud, keyPath, nil)
	os.Chmod(keyPath, 0o644)
	_, err := New().Init(context.Background(), provider.Settings{Config: cfg, StateDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+keyPath) || errors.Is(err, provider.ErrTransient) {
		t.Errorf("Init with connector.key_path at mode 0644: %v; want a permanent refusal saying `chmod 600 %s`", err, keyPath)
	}
	os.Chmod(keyPath, 0o600)

	creds := filepath.Join(t.TempDir(), "credentials")
	os.WriteFile(creds, []byte("[default]\naws_access_key_id = AKIAFAKE\naws_secret_access_key = fake\n"), 0o644)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	_, err = New().Init(context.Background(), provider.Settings{Config: cfg, StateDir: t.TempDir()})
	if !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), "chmod 600 "+creds) {
		t.Errorf("Init with AWS_SHARED_CREDENTIALS_FILE at mode 0644: %v; want a refusal saying `chmod 600 %s`", err, creds)
	}
	os.Chmod(creds, 0o600)
	newGroup(t, cloud, keyPath, nil) // at 0600 both pass
}
