package sdk_test

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/sdk"
	pb "github.com/berth-ci/berth/sdk/proto"
)

// checkedPool is a group that checks its provider_config before Init.
type checkedPool struct{ pool }

func (checkedPool) CheckConfig(raw []byte) error {
	if string(raw) == `{"zone":"a"}` {
		return nil
	}
	return errors.Join(&provider.ConfigError{Key: "zone", Message: "unknown zone; use a"}, errors.New("and something else"))
}

// A plugin's CheckConfig answer reaches the host key by key; a group
// without a check says it cannot tell, rather than OK.
func TestCheckConfigCrossesTheProtocol(t *testing.T) {
	ctx := context.Background()
	c := connect(t, &checkedPool{})
	if err := c.CheckConfig(ctx, []byte(`{"zone":"a"}`)); err != nil {
		t.Errorf("good config: %v", err)
	}
	err := c.CheckConfig(ctx, []byte(`{"zone":"b"}`))
	got := provider.ConfigErrors(err)
	if len(got) != 2 || got[0].Key != "zone" || got[0].Message != "unknown zone; use a" || got[1].Key != "" || got[1].Message != "and something else" {
		t.Errorf("problems = %v; want the zone's and the table's", err)
	}
	if err := connect(t, &pool{}).CheckConfig(ctx, []byte(`{}`)); !errors.Is(err, sdk.ErrCheckUnsupported) {
		t.Errorf("group without a check: %v, want ErrCheckUnsupported", err)
	}
}

// A plugin built before CheckConfig existed answers UNIMPLEMENTED (what
// the generated server without the method does): the host takes it as
// "cannot check", not as a failure.
func TestCheckConfigOfAnOldPlugin(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterInstanceGroupServer(srv, pb.UnimplementedInstanceGroupServer{})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	raw, err := (&sdk.GRPCPlugin{}).GRPCClient(context.Background(), nil, conn)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.(*sdk.Client).CheckConfig(context.Background(), []byte(`{}`)); !errors.Is(err, sdk.ErrCheckUnsupported) {
		t.Errorf("old plugin: %v, want ErrCheckUnsupported", err)
	}
}
