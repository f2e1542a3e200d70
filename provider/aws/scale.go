package aws

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/smithy-go"
)

// instanceID is the shape of an EC2 instance ID; anything else is refused
// before AWS is asked.
var instanceID = regexp.MustCompile(`^i-[0-9a-f]{8,17}$`)

// standbyCount counts the group's instances in Standby: berth's suspended
// instances, which leave DesiredCapacity while parked and take it back
// when they resume, so their room under MaxSize is kept free for them.
func standbyCount(grp asgtypes.AutoScalingGroup) int {
	n := 0
	for _, in := range grp.Instances {
		if in.LifecycleState == asgtypes.LifecycleStateStandby || in.LifecycleState == asgtypes.LifecycleStateEnteringStandby {
			n++
		}
	}
	return n
}

// heldCount counts the instances that DesiredCapacity accounts for:
// launching (Pending, including lifecycle hook waits) and InService.
func heldCount(grp asgtypes.AutoScalingGroup) int {
	n := 0
	for _, in := range grp.Instances {
		if lc := string(in.LifecycleState); strings.HasPrefix(lc, "Pending") || lc == string(asgtypes.LifecycleStateInService) {
			n++
		}
	}
	return n
}

// Increase raises the group's DesiredCapacity by n, or by as much as
// MaxSize allows, and returns how many instances it asked for; the group
// launches them and a later Update lists them. When MaxSize stops it short
// the error wraps ErrMaxSize and gives the numbers.
func (g *Group) Increase(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	g.scaleMu.Lock()
	defer g.scaleMu.Unlock()
	grp, err := g.describeGroup(ctx)
	if err != nil {
		return 0, err
	}
	desired, max, standby := int(aws.ToInt32(grp.DesiredCapacity)), int(aws.ToInt32(grp.MaxSize)), standbyCount(grp)
	// Protected instances can hold the group above its desired capacity
	// (someone lowered it, or a scaling policy did); the group launches
	// only once desired exceeds what it holds, so count from there.
	if held := heldCount(grp); held > desired {
		g.log.Warn("the group holds more instances than its desired capacity (they are protected from scale-in); counting from the instances", "desired", desired, "held", held)
		desired = held
	}
	room := max - desired - standby
	add := min(n, room)
	short := func(added int) error {
		return fmt.Errorf("%w: asked for %d more instances, added %d: group %s has desired capacity %d (before this call), %d in Standby, MaxSize %d; raise MaxSize or lower berth's max_instances to match",
			ErrMaxSize, n, added, g.cfg.Name, desired, standby, max)
	}
	if add <= 0 {
		g.log.Warn("increase refused: group at MaxSize", "requested", n, "desired", desired, "standby", standby, "max", max)
		return 0, short(0)
	}
	_, err = g.asg.SetDesiredCapacity(ctx, &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: aws.String(g.cfg.Name),
		DesiredCapacity:      aws.Int32(int32(desired + add)),
		HonorCooldown:        aws.Bool(false),
	})
	if err != nil {
		return 0, mapErr(err)
	}
	g.log.Info("raised desired capacity", "requested", n, "added", add, "from", desired, "to", desired+add, "standby", standby, "max", max)
	if add < n {
		return add, short(add)
	}
	return add, nil
}

// Decrease terminates the given instances through the group, decrementing
// its desired capacity so that the group does not launch replacements.
// An instance that is already gone (or was never in the group) is
// accepted: deletes are idempotent. IDs that are not instance IDs are
// refused with ErrUnknownInstance.
func (g *Group) Decrease(ctx context.Context, ids []string) ([]string, error) {
	g.scaleMu.Lock()
	defer g.scaleMu.Unlock()
	var accepted []string
	var errs []error
	for _, id := range ids {
		if !instanceID.MatchString(id) {
			errs = append(errs, fmt.Errorf("%w: %q is not an EC2 instance ID", ErrUnknownInstance, id))
			continue
		}
		err := g.terminate(ctx, id, true)
		if errors.Is(mapErr(err), ErrMinSize) && g.aboveDesired(ctx) {
			// Desired capacity was lowered below what the group holds:
			// removing one without decrementing launches no replacement.
			err = g.terminate(ctx, id, false)
		}
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" && strings.Contains(ae.ErrorMessage(), "not found") {
			g.log.Info("instance already gone from the group", "id", id)
			accepted = append(accepted, id)
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("terminate %s: %w", id, mapErr(err)))
			continue
		}
		g.log.Info("terminating instance and decrementing desired capacity", "id", id)
		accepted = append(accepted, id)
	}
	return accepted, errors.Join(errs...)
}

func (g *Group) terminate(ctx context.Context, id string, decrement bool) error {
	_, err := g.asg.TerminateInstanceInAutoScalingGroup(ctx, &autoscaling.TerminateInstanceInAutoScalingGroupInput{
		InstanceId:                     aws.String(id),
		ShouldDecrementDesiredCapacity: aws.Bool(decrement),
	})
	return err
}

// aboveDesired reports whether the group holds more instances than its
// desired capacity, so one fewer still leaves it at or above desired.
func (g *Group) aboveDesired(ctx context.Context) bool {
	grp, err := g.describeGroup(ctx)
	return err == nil && heldCount(grp) > int(aws.ToInt32(grp.DesiredCapacity))
}
