package gcp

import (
	"context"

	"github.com/berth-ci/berth/provider"
)

// RequestedSize implements provider.RequestedSizer: the managed instance
// group's targetSize plus its targetSuspendedSize, read with
// instanceGroupManagers.get. berth reads it once after a restart to drop
// the increases it had pending that never reached Google (issue 43).
//
// Both fields leave out what this plugin deletes: Decrease goes through
// deleteInstances, which "reduces the targetSize of the managed instance
// group by the number of instances that you delete"
// (https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers/deleteInstances);
// suspendInstances moves an instance from targetSize to
// targetSuspendedSize and resumeInstances back
// (https://cloud.google.com/compute/docs/instance-groups/suspend-stop-vms-in-mig).
// berth counts a suspended instance toward max_instances, so both are
// counted, as Increase does against max_size. targetSize "is the target
// number of running instances ... The number of running instances can be
// lower while the group is creating them"
// (https://cloud.google.com/compute/docs/reference/rest/v1/instanceGroupManagers,
// field targetSize): the instances asked for and not listed yet are
// exactly the increases that reached Google.
func (g *Group) RequestedSize(ctx context.Context) (int, error) {
	m, err := g.getGroup(ctx)
	if err != nil {
		return 0, err
	}
	return int(m.GetTargetSize()) + int(m.GetTargetSuspendedSize()), nil
}

var _ provider.RequestedSizer = (*Group)(nil)
