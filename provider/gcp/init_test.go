package gcp

import (
	"context"
	"errors"
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
