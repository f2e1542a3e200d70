package manager

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/config"
	"github.com/berth-ci/berth/ha"
	"github.com/berth-ci/berth/jobsource/queue"
)

// idFloorPath is the file that keeps the highest job ID this manager saw
// under [ha] (queue.WithIDFloorFile): IDs never repeat after etcd lost its
// data, and an etcd restored from a snapshot is told from the present.
func idFloorPath(stateDir string) string { return filepath.Join(stateDir, "queue-last-id") }

// queuePrefix is where the built-in queue lives in etcd.
func queuePrefix(h *config.HA) string { return h.KeyPrefix + "queue/" }

// openRepairQueue opens the fleet's queue in etcd with this host's ID
// floor and no fence, for the `berth state` commands that run while no
// manager does.
func openRepairQueue(ctx context.Context, cli *clientv3.Client, cfg config.Config, log *slog.Logger) (*queue.Queue, error) {
	return queue.OpenEtcd(ctx, cli, queuePrefix(cfg.HA), nil, queue.WithLogger(log), queue.WithIDFloorFile(idFloorPath(cfg.StateDir)))
}

// RaiseJobIDs raises the queue's last job ID in etcd to the highest this
// host's manager saw, for `berth state new-fleet`: the new fleet's IDs go on
// above the old one's, and its state does not look like the past
// (queue.PastError).
func RaiseJobIDs(ctx context.Context, cli *clientv3.Client, cfg config.Config, log *slog.Logger) error {
	q, err := openRepairQueue(ctx, cli, cfg, log)
	if err != nil {
		return err
	}
	defer q.Close()
	return q.RaiseSeqToSeen()
}

// RestoreAccepted is what AcceptRestore did.
type RestoreAccepted struct {
	queue.Accepted
	// Forgotten is how many state records (instances, bookings, parked
	// environments, pending increases) were deleted.
	Forgotten int64
}

// AcceptRestore makes an etcd restored from a snapshot the fleet's present
// again, for `berth state accept-restore` while no manager runs (it refuses
// while one campaigns): every instance becomes unknown (the next leader
// resets or replaces each before any job, autoscaler.unknown_instances),
// the jobs the snapshot cannot account for are failed with
// queue.RestoreReason, and job IDs go on above the highest this host's
// manager saw. Run on every manager's host: each knows its own highest ID.
func AcceptRestore(ctx context.Context, cli *clientv3.Client, cfg config.Config, log *slog.Logger) (RestoreAccepted, error) {
	var done RestoreAccepted
	known, err := knownFleet(cfg.StateDir, FleetIDFile)
	if err != nil {
		return done, err
	}
	if known == "" {
		return done, fmt.Errorf("%s records no fleet: this host's manager never led or stood by for one, so it has nothing to compare etcd with; run accept-restore on the hosts of the managers that served the fleet", filepath.Join(cfg.StateDir, FleetIDFile))
	}
	n, err := ha.Candidates(ctx, cli, cfg.HA.KeyPrefix)
	if err != nil {
		return done, err
	}
	if n > 0 {
		return done, fmt.Errorf("%d berth managers of this fleet are running (keys under %selection/): stop every one, wait ha.lease_ttl for their candidacies to expire, and run accept-restore again", n, cfg.HA.KeyPrefix)
	}
	if done.Forgotten, err = ha.ForgetInstances(ctx, cli, cfg.HA.KeyPrefix, known); err != nil {
		return done, err
	}
	q, err := openRepairQueue(ctx, cli, cfg, log)
	if err != nil {
		return done, err
	}
	defer q.Close()
	done.Accepted, err = q.AcceptPast(ctx)
	return done, err
}
