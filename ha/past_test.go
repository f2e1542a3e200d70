package ha

import (
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/internal/etcdtest"
	"github.com/berth-ci/berth/store"
)

// Issue 43: etcd rolled back to an older copy of its data holds the
// fleet's identity, but a store that saw a later revision refuses it as
// the past, as a fence would be refused (the fleet stops for good). Its
// instances are forgotten only while no manager campaigns.
func TestRolledBackEtcdIsThePast(t *testing.T) {
	c := etcdtest.Start(t, 1) // its own: the test rolls etcd back
	cli := c.Client(t)
	ctx := testCtx(t)
	prefix := "/past/"
	st, err := OpenStore(ctx, cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CheckIdentity(ctx); err != nil {
		t.Fatal(err)
	}
	copied, err := c.CopyMember(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"state/instances/i-1", "state/reservations/r-1", "state/pending", "state/arrivals"} {
		if _, err := cli.Put(ctx, prefix+k, "{}"); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CheckIdentity(ctx); err != nil {
		t.Fatalf("the present taken for the past: %v", err)
	}
	if err := c.RollBackMember(0, copied); err != nil {
		t.Fatal(err)
	}
	var rb *RolledBackError
	err = st.CheckIdentity(ctx)
	if !errors.As(err, &rb) || rb.Found >= rb.Seen || !errors.Is(err, store.ErrFenced) {
		t.Fatalf("CheckIdentity on the rolled-back etcd: %v, want a RolledBackError that fences", err)
	}

	// Accepting it: refused while a manager campaigns, then the records of
	// instances and bookings go, the arrival model stays.
	for _, k := range []string{"state/instances/i-1", "state/reservations/r-1", "state/pending", "state/arrivals"} {
		if _, err := cli.Put(ctx, prefix+k, "{}"); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, prefix+"election/x", "manager", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	if n, err := Candidates(ctx, cli, prefix); err != nil || n != 1 {
		t.Fatalf("Candidates = %d, %v, want 1", n, err)
	}
	if _, err := ForgetInstances(ctx, cli, prefix, st.ID()); err == nil {
		t.Fatalf("the instances were forgotten while a manager campaigns")
	}
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	var ie *IdentityError
	if _, err := ForgetInstances(ctx, cli, prefix, "another"); !errors.As(err, &ie) {
		t.Fatalf("ForgetInstances of another fleet: %v, want an IdentityError", err)
	}
	if n, err := ForgetInstances(ctx, cli, prefix, st.ID()); err != nil || n != 3 {
		t.Fatalf("ForgetInstances = %d, %v, want 3 keys deleted", n, err)
	}
	resp, err := cli.Get(ctx, prefix+"state/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Key) != prefix+"state/arrivals" {
		t.Fatalf("state keys left: %v, %v, want the arrival model's", resp.Kvs, err)
	}
}
