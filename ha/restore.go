package ha

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A restored etcd (a snapshot, a rollback) holds the fleet's identity but
// an older state: instances it records idle may run jobs issued after the
// snapshot (issue 43; the manager notices it, queue.PastError). Accepting
// the restore makes every instance unknown, so that the next leader's
// first listing resets or replaces each one before any job
// (autoscaler.unknown_instances, docs/semantics.md) instead of booking
// jobs beside what runs there.

// forgottenOnRestore are the state's keys that describe instances and
// what they hold; the arrival model (state/arrivals) and the learned state
// (state/learned) are kept.
var forgottenOnRestore = []string{"state/instances/", "state/reservations/", "state/environments/", "state/pending"}

// checkIdentityOf is Store.CheckIdentity for a caller without a Store.
func checkIdentityOf(ctx context.Context, cli *clientv3.Client, prefix, id string) error {
	return (&Store{cli: cli, prefix: prefix, id: id}).checkIdentity(ctx, 0)
}

// ForgetInstances deletes the records of the instances, bookings, parked
// environments and pending increases of the fleet id under prefix, in one
// transaction that applies only while etcd holds that identity and no
// manager campaigns. It
// returns how many keys it deleted.
func ForgetInstances(ctx context.Context, cli *clientv3.Client, prefix, id string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultOpTimeout)
	defer cancel()
	var ops []clientv3.Op
	for _, p := range forgottenOnRestore {
		opts := []clientv3.OpOption{clientv3.WithPrefix()}
		if p == "state/pending" {
			opts = nil
		}
		ops = append(ops, clientv3.OpDelete(prefix+p, opts...))
	}
	resp, err := cli.Txn(ctx).If(
		clientv3.Compare(clientv3.Value(prefix+"meta/id"), "=", id),
		clientv3.Compare(clientv3.CreateRevision(prefix+"election/"), "=", 0).WithPrefix(), // no manager runs
	).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("forget the restored state's instances: %w", err)
	}
	if !resp.Succeeded {
		if err := checkIdentityOf(ctx, cli, prefix, id); err != nil {
			return 0, err
		}
		return 0, fmt.Errorf("a berth manager of this fleet started meanwhile (a key under %selection/): stop every one and run accept-restore again", prefix)
	}
	var n int64
	for _, r := range resp.Responses {
		n += r.GetResponseDeleteRange().Deleted
	}
	return n, nil
}

// Candidates returns how many managers campaign under prefix now (their
// keys under election/ live as long as their leases).
func Candidates(ctx context.Context, cli *clientv3.Client, prefix string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultOpTimeout)
	defer cancel()
	resp, err := cli.Get(ctx, prefix+"election/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("read the managers' candidacies: %w", err)
	}
	return resp.Count, nil
}
