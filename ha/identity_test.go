package ha

import (
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A manager that knew the fleet refuses a state whose identity is gone or
// another one, at open and at every Load; NewFleet is the way on.
func TestIdentityIsCheckedAtEveryLoad(t *testing.T) {
	cli, prefix, ctx := client(t), newPrefix(t), testCtx(t)
	first, err := OpenStore(ctx, cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := first.Load(); err != nil {
		t.Fatalf("load of a new fleet: %v", err)
	}
	// etcd emptied: every key of the prefix gone.
	if _, err := cli.Delete(ctx, prefix, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	var ie *IdentityError
	if _, _, err := first.Load(); !errors.As(err, &ie) || ie.Found != "" || ie.Want != first.ID() {
		t.Fatalf("load after etcd was emptied: %v, want an IdentityError for a lost identity", err)
	}
	known, err := OpenKnownStore(ctx, cli, prefix, first.ID())
	if err != nil {
		t.Fatal(err)
	}
	if err := known.CheckIdentity(ctx); !errors.As(err, &ie) {
		t.Fatalf("a restarted manager's check: %v, want an IdentityError", err)
	}
	if resp, _ := cli.Get(ctx, prefix+"meta/id"); len(resp.Kvs) != 0 {
		t.Fatalf("opening a known fleet made an identity: %s", resp.Kvs[0].Value)
	}
	id, made, err := NewFleet(ctx, cli, prefix)
	if err != nil || !made || id == first.ID() {
		t.Fatalf("NewFleet = %q, %v, %v", id, made, err)
	}
	if _, _, err := known.Load(); !errors.As(err, &ie) || ie.Found != id {
		t.Fatalf("load with another fleet in etcd: %v", err)
	}
	again, made, err := NewFleet(ctx, cli, prefix)
	if err != nil || made || again != id {
		t.Fatalf("NewFleet on a fleet = %q, %v, %v, want %q, false", again, made, err, id)
	}
	adopted, err := OpenKnownStore(ctx, cli, prefix, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := adopted.Load(); err != nil {
		t.Fatalf("load of the new fleet: %v", err)
	}
}
