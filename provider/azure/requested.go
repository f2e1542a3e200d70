package azure

import (
	"context"

	"github.com/berth-ci/berth/provider"
)

// RequestedSize implements provider.RequestedSizer: the scale set's
// sku.capacity, "the number of virtual machines in the scale set"
// (https://learn.microsoft.com/en-us/rest/api/compute/virtual-machine-scale-sets/get,
// Sku.capacity), read with Virtual Machine Scale Sets - Get. berth reads
// it once after a restart to drop the increases it had pending that never
// reached Azure (issue 43).
//
// It counts deallocated instances (berth's suspended ones), which berth
// counts toward max_instances too, and leaves out what this plugin
// deletes: Decrease goes through Delete Instances, which removes the
// virtual machines from the set and lowers its capacity by as many
// (https://learn.microsoft.com/en-us/rest/api/compute/virtual-machine-scale-sets/delete-instances).
func (g *Group) RequestedSize(ctx context.Context) (int, error) {
	set, err := g.getSet(ctx)
	if err != nil {
		return 0, err
	}
	return capacity(set), nil
}

var _ provider.RequestedSizer = (*Group)(nil)
