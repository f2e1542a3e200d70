package ha

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/internal/etcdtest"
)

// With etcd's authentication on, berth's username and password open the
// state.
func TestOpenWithCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own etcd")
	}
	c := etcdtest.Start(t, 1)
	admin := c.Client(t)
	ctx := testCtx(t)
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "berth", "berthpw"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "berth"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "berth", "/berth/", clientv3.GetPrefixRangeEnd("/berth/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserGrantRole(ctx, "berth", "berth"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	h := &config.HA{EtcdEndpoints: c.Endpoints, LeaseTTL: testTTL, KeyPrefix: "/berth/", Username: "berth", Password: "berthpw"}
	cli, s, err := Open(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	el := NewElector(cli, h.KeyPrefix, h.LeaseTTL, "a", quiet())
	term, err := el.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(context.Background())
	s.SetFence(term.Fence())
	if err := s.Save(instances("i1")); err != nil {
		t.Fatal(err)
	}

}

func TestDialRefusesATLSFileThatIsNotPEM(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Dial(&config.HA{EtcdEndpoints: []string{"https://127.0.0.1:1"}, CAFile: ca})
	if err == nil || !strings.Contains(err.Error(), ca) || !strings.Contains(err.Error(), "PEM") {
		t.Fatalf("dial with a bad CA file: %v, want an error naming it", err)
	}
}
