package aws

import (
	"fmt"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/berth-ci/berth/provider"
)

// goingErr marks err with provider.ErrInstanceGoing when the instance will
// not run again in the group: shutting-down or terminated, or stopping or
// stopped while in service, which the group's EC2 health check replaces
// ("Amazon EC2 Auto Scaling considers an instance unhealthy if it is in
// any state other than running", Health checks for instances in an Auto
// Scaling group, EC2 Auto Scaling User Guide). berth then books no job
// there and moves a job that has not reached it yet.
func goingErr(in ec2types.Instance, err error) error {
	if in.State == nil {
		return err
	}
	switch in.State.Name {
	case ec2types.InstanceStateNameShuttingDown, ec2types.InstanceStateNameTerminated,
		ec2types.InstanceStateNameStopping, ec2types.InstanceStateNameStopped:
		return fmt.Errorf("%w: %w", err, provider.ErrInstanceGoing)
	}
	return err
}
