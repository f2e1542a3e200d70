package azure

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/berth-ci/berth/provider"
)

// A token endpoint that cannot be reached (Entra ID down, a proxy or a
// network not up yet) is transient at Init: berth waits and tries again,
// as for an ARM endpoint that cannot be reached. It is not a credential
// error, which would make berth exit and send the operator to check a
// secret that is fine.
func TestUnreachableTokenEndpointIsTransient(t *testing.T) {
	f := fakeAzure(t, quick)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "https://" + l.Addr().String()
	l.Close()
	_, err = New().Init(context.Background(), provider.Settings{Config: f.config(t, map[string]any{"authority_host": down}), StateDir: t.TempDir()})
	if !errors.Is(err, provider.ErrTransient) || errors.Is(err, ErrCredentials) {
		t.Errorf("Init with the token endpoint down: %v; want provider.ErrTransient, not ErrCredentials", err)
	}
}
