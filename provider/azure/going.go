package azure

import (
	"fmt"

	"github.com/berth-ci/berth/provider"
)

// goingErr marks err with provider.ErrInstanceGoing when the instance will
// not serve a job again without berth: the set is deleting it
// (provisioningState Deleting: a scale-in, an automatic repair, a Spot
// eviction with the Delete policy), or it is being or was deallocated or
// stopped by someone else (power states PowerState/deallocating,
// deallocated, stopping, stopped; a Spot eviction with the Deallocate
// policy; "States and billing status of Azure Virtual Machines", and
// armcompute's VirtualMachineScaleSetVMProperties.ProvisioningState and
// InstanceViewStatus codes). berth then books no job there and moves a
// job that has not reached it yet to another instance, instead of failing
// it with "not running".
func goingErr(s vmState, err error) error {
	switch {
	case s.provisioning == "deleting",
		s.power == "deallocating", s.power == "deallocated", s.power == "stopping", s.power == "stopped":
		return fmt.Errorf("%w: %w", err, provider.ErrInstanceGoing)
	}
	return err
}
