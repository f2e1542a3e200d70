package aws

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/berth-ci/berth/provider"
)

// RequestedSize implements provider.RequestedSizer: the Auto Scaling
// group's DesiredCapacity, "the desired size of the group"
// (https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_AutoScalingGroup.html),
// read with DescribeAutoScalingGroups, plus its instances in Standby.
// berth reads it once after a restart to drop the increases it had pending
// that never reached AWS (issue 43).
//
// It leaves out what this plugin deletes: Decrease terminates with
// ShouldDecrementDesiredCapacity
// (https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_TerminateInstanceInAutoScalingGroup.html).
// An instance put in Standby (berth's suspend) "decrements the desired
// capacity" until it returns
// (https://docs.aws.amazon.com/autoscaling/ec2/userguide/as-enter-exit-standby.html),
// while berth still counts it toward max_instances, so Standby instances
// are added back, as Increase does against MaxSize. Instances held above
// the desired capacity (protected from scale-in) are counted from the
// instances, as Increase counts them.
func (g *Group) RequestedSize(ctx context.Context) (int, error) {
	grp, err := g.describeGroup(ctx)
	if err != nil {
		return 0, err
	}
	return max(int(aws.ToInt32(grp.DesiredCapacity)), heldCount(grp)) + standbyCount(grp), nil
}

var _ provider.RequestedSizer = (*Group)(nil)
