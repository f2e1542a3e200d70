package gcp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/internal/gcpfake"
	"github.com/berth-ci/berth/provider"
)

// Init against an API that refuses connections fails with a transient
// error, so berth waits for it instead of exiting (issue 44); a refusal
// by the API itself stays permanent.
func TestInitErrorsTransientOnlyWhenTheAPIIsUnreachable(t *testing.T) {
	cloud, keyPath, saPath := fakeGCP(t, gcpfake.Options{})
	cfg := configFor(t, cloud, keyPath, saPath, nil)

	cloud.Deny("instanceGroupManagers.get", true)
	_, err := New().Init(context.Background(), provider.Settings{Config: cfg, StateDir: t.TempDir()})
	if !errors.Is(err, ErrPermission) || errors.Is(err, provider.ErrTransient) {
		t.Errorf("Init with the group's get denied: %v; want a permanent ErrPermission", err)
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
	cloud, keyPath, saPath := fakeGCP(t, gcpfake.Options{})
	cfg := configFor(t, cloud, keyPath, saPath, nil)
	for _, path := range []string{keyPath, saPath} {
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := New().Init(context.Background(), provider.Settings{Config: cfg, StateDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) || errors.Is(err, provider.ErrTransient) {
			t.Errorf("Init with %s at mode 0644: %v; want a permanent refusal saying `chmod 600 %s`", path, err, path)
		}
		os.Chmod(path, 0o600)
	}
	env := filepath.Join(t.TempDir(), "adc.json")
	os.WriteFile(env, cloud.ServiceAccountKey(), 0o640)
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", env)
	noFile := configFor(t, cloud, keyPath, saPath, map[string]any{"credentials_file": ""})
	if _, err := New().Init(context.Background(), provider.Settings{Config: noFile, StateDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "chmod 600 "+env) {
		t.Errorf("Init with GOOGLE_APPLICATION_CREDENTIALS at mode 0640: %v; want a refusal", err)
	}
	newGroup(t, cloud, keyPath, saPath, nil) // at 0600 both pass
}
