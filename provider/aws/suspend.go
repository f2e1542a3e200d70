package aws

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// resumePoll is how often Resume asks EC2 whether a started instance runs;
// starts take tens of seconds, and the call counts against EC2's rate.
const resumePoll = 2 * time.Second

func (g *Group) lifecycles(ctx context.Context) (map[string]asgtypes.LifecycleState, error) {
	grp, err := g.describeGroup(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]asgtypes.LifecycleState{}
	for _, in := range grp.Instances {
		out[aws.ToString(in.InstanceId)] = in.LifecycleState
	}
	return out, nil
}

func (g *Group) setInFlight(m map[string]bool, id string, on bool) {
	g.mu.Lock()
	if on {
		m[id] = true
	} else {
		delete(m, id)
	}
	g.mu.Unlock()
}

// Suspend moves each instance to Standby, decrementing the group's desired
// capacity so that it launches no replacement, and stops it (hibernating
// it with hibernate = true). A stopped instance costs only its EBS volumes;
// its disk survives and its private address stays. An instance already in
// Standby is only stopped, which finishes a suspend interrupted between
// the two calls.
func (g *Group) Suspend(ctx context.Context, ids []string) ([]string, error) {
	return g.eachInstance(ctx, "suspend", ids, g.suspendOne)
}

// eachInstance runs one (a suspend or resume) on each of ids with its
// lifecycle state in the group, and returns those it succeeded for.
func (g *Group) eachInstance(ctx context.Context, verb string, ids []string, one func(context.Context, string, asgtypes.LifecycleState) error) ([]string, error) {
	if !g.cfg.Suspend {
		return nil, fmt.Errorf("%w: set suspend = true in provider_config (the group's instances must be EBS-backed On-Demand)", ErrUnsupported)
	}
	states, err := g.lifecycles(ctx)
	if err != nil {
		return nil, err
	}
	var accepted []string
	var errs []error
	for _, id := range ids {
		if err := one(ctx, id, states[id]); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", verb, id, err))
			continue
		}
		accepted = append(accepted, id)
	}
	return accepted, errors.Join(errs...)
}

func (g *Group) suspendOne(ctx context.Context, id string, lc asgtypes.LifecycleState) error {
	switch lc {
	case asgtypes.LifecycleStateInService:
		g.setInFlight(g.suspending, id, true)
		defer g.setInFlight(g.suspending, id, false)
		// EnterStandby changes desired capacity, so it takes scaleMu;
		// the slow stop does not.
		g.scaleMu.Lock()
		_, err := g.asg.EnterStandby(ctx, &autoscaling.EnterStandbyInput{
			AutoScalingGroupName:           aws.String(g.cfg.Name),
			InstanceIds:                    []string{id},
			ShouldDecrementDesiredCapacity: aws.Bool(true),
		})
		g.scaleMu.Unlock()
		if err != nil {
			return mapErr(err)
		}
	case asgtypes.LifecycleStateStandby, asgtypes.LifecycleStateEnteringStandby:
	case "":
		return fmt.Errorf("%w: %s is not in group %s", ErrUnknownInstance, id, g.cfg.Name)
	default:
		return fmt.Errorf("%w: %s is %s in the group; only InService instances can be suspended", ErrInvalidState, id, lc)
	}
	if _, err := g.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}, Hibernate: aws.Bool(g.cfg.Hibernate)}); err != nil {
		// Left in Standby and running: listed as suspending, and a
		// repeated Suspend stops it.
		return mapErr(err)
	}
	g.log.Info("suspended instance: Standby and stopping", "id", id, "hibernate", g.cfg.Hibernate)
	return nil
}

// Resume starts each instance, waits until EC2 reports it running, and
// moves it out of Standby, which gives the group back its desired
// capacity. Leaving Standby before the machine runs would let the group's
// health check find it stopped and replace it. The wait is bounded by ctx
// and instance_ready_timeout.
func (g *Group) Resume(ctx context.Context, ids []string) ([]string, error) {
	return g.eachInstance(ctx, "resume", ids, g.resumeOne)
}

func (g *Group) resumeOne(ctx context.Context, id string, lc asgtypes.LifecycleState) error {
	switch lc {
	case asgtypes.LifecycleStateStandby:
	case asgtypes.LifecycleStateInService, asgtypes.LifecycleStatePending:
		return nil // already resumed
	case "":
		return fmt.Errorf("%w: %s is not in group %s", ErrUnknownInstance, id, g.cfg.Name)
	default:
		return fmt.Errorf("%w: %s is %s in the group; only Standby instances can be resumed", ErrInvalidState, id, lc)
	}
	g.setInFlight(g.resuming, id, true)
	defer g.setInFlight(g.resuming, id, false)
	if _, err := g.ec2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{id}}); err != nil {
		return mapErr(err)
	}
	// From here a resume is never left half done: the instance ends in
	// service, or back in Standby and stopped (undoResume), never
	// started in Standby, which berth would call suspended.
	if err := g.waitRunning(ctx, id); err != nil {
		return g.undoResume(id, err)
	}
	// Only ExitStandby changes desired capacity; Increase and Decrease
	// need not wait for the start above.
	g.scaleMu.Lock()
	_, err := g.asg.ExitStandby(ctx, &autoscaling.ExitStandbyInput{
		AutoScalingGroupName: aws.String(g.cfg.Name),
		InstanceIds:          []string{id},
	})
	g.scaleMu.Unlock()
	if err != nil {
		return g.undoResume(id, mapErr(err))
	}
	// The group moves it through Pending to InService; until then the
	// listing says resuming, not creating.
	g.setInFlight(g.resumed, id, true)
	g.log.Info("resumed instance: running and out of Standby", "id", id)
	return nil
}

// waitRunning polls DescribeInstances until EC2 reports id running,
// within instance_ready_timeout. A throttled poll is not a failure: the
// start goes on whatever the rate limit says of the poll (EC2 "Request
// throttling": RequestLimitExceeded is per account and per API action),
// so the poll is tried again after resumePoll.
func (g *Group) waitRunning(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.InstanceReadyTimeout)
	defer cancel()
	for {
		in, err := g.describe(ctx, id)
		switch {
		case errors.Is(err, ErrThrottled):
			g.log.Info("DescribeInstances throttled while waiting for a resumed instance; polling again", "id", id, "wait", resumePoll)
		case err != nil:
			return err
		case in.State != nil && in.State.Name == ec2types.InstanceStateNameRunning:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s did not reach running after StartInstances: %w", ErrInvalidState, id, ctx.Err())
		case <-time.After(resumePoll):
		}
	}
}

// undoStopTimeout bounds the StopInstances that undoes a failed resume;
// it runs after the caller's context may have ended.
const undoStopTimeout = 30 * time.Second

// undoResume stops an instance whose resume failed after StartInstances,
// so that it is back where Suspend left it: in Standby and stopped (a
// later Resume starts it again). If even the stop fails, the instance is
// started in Standby and listed as suspending; a later Suspend stops it.
func (g *Group) undoResume(id string, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), undoStopTimeout)
	defer cancel()
	if _, err := g.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}, Hibernate: aws.Bool(g.cfg.Hibernate)}); err != nil {
		g.log.Error("resume failed and the instance could not be stopped again: it runs in Standby; a later suspend stops it", "id", id, "err", err, "cause", cause)
		return fmt.Errorf("%w; stopping it again failed too (it runs in Standby): %v", cause, mapErr(err))
	}
	g.log.Warn("resume failed; the instance is back in Standby and stopping", "id", id, "err", cause)
	return fmt.Errorf("%w; the instance was stopped again and stays in Standby", cause)
}
