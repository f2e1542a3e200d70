package aws

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	asgtypes "github.com/aws/aws-sdk-go-v2/service/autoscaling/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/berth-ci/berth/provider"
)

// groupTag is the tag Auto Scaling puts on every instance it launches.
const groupTag = "aws:autoscaling:groupName"

// describePageSize is how many instances one DescribeInstances page asks
// for: the API's maximum, so a large group costs few calls.
const describePageSize = 1000

// protectBatch is the most instance IDs SetInstanceProtection takes at once.
const protectBatch = 50

// op is a Suspend or Resume in flight, which the listing reports instead
// of what the APIs alone would say.
type op int

const (
	opNone op = iota
	opSuspend
	opResume
)

// mapState turns an instance's Auto Scaling lifecycle state and EC2 state
// into berth's. ec2State is "" when EC2's eventually consistent listing does
// not show the instance yet. launched is its launch time (zero if unknown).
//
// Lifecycle hook waits (Pending:Wait, Terminating:Wait, ...) count as the
// phase they wait in. Standby is where berth parks suspended instances;
// whether it is suspending, suspended or resuming depends on EC2's state
// and on which call is in flight. Warmed:* are warm-pool instances, stopped
// or hibernated outside the group's capacity: suspended.
func mapState(lifecycle string, ec2State ec2types.InstanceStateName, inFlight op, launched, now time.Time, readyTimeout time.Duration) provider.State {
	switch ec2State {
	case ec2types.InstanceStateNameShuttingDown:
		return provider.StateDeleting
	case ec2types.InstanceStateNameTerminated:
		return provider.StateDeleted
	}
	// Timed out means the machine never came up. A running machine that
	// the group still holds in Pending waits for the group (a lifecycle
	// hook, or leaving Standby); berth's own ready timeout covers that.
	creating := func() provider.State {
		if ec2State != ec2types.InstanceStateNameRunning && !launched.IsZero() && now.Sub(launched) > readyTimeout {
			return provider.StateTimeout
		}
		return provider.StateCreating
	}
	switch {
	case strings.HasPrefix(lifecycle, "Terminating"), lifecycle == "Detaching":
		return provider.StateDeleting
	case lifecycle == "Terminated", lifecycle == "Detached":
		return provider.StateDeleted
	case strings.HasPrefix(lifecycle, "Warmed:"):
		return provider.StateSuspended
	case lifecycle == "EnteringStandby":
		return provider.StateSuspending
	case lifecycle == "Standby":
		switch {
		case inFlight == opResume:
			return provider.StateResuming
		case ec2State == ec2types.InstanceStateNameStopped:
			return provider.StateSuspended
		case ec2State == ec2types.InstanceStateNamePending:
			return provider.StateResuming
		}
		// Running or stopping: a suspend under way, or one interrupted
		// between EnterStandby and StopInstances, which Suspend finishes.
		return provider.StateSuspending
	case strings.HasPrefix(lifecycle, "Pending"), lifecycle == "Quarantined":
		if inFlight == opResume {
			return provider.StateResuming
		}
		return creating()
	case lifecycle == "InService":
		switch ec2State {
		case ec2types.InstanceStateNameRunning:
			return provider.StateRunning
		case "", ec2types.InstanceStateNamePending:
			if inFlight == opResume {
				return provider.StateResuming
			}
			return creating()
		}
		// InService but stopped: the group's health check replaces it.
		return provider.StateDeleting
	}
	return creating()
}

// ec2Info is what the provider needs of an EC2 instance.
type ec2Info struct {
	state    ec2types.InstanceStateName
	launched time.Time
}

// listInstances pages through the group's instances in EC2, found by the
// tag Auto Scaling gives them, terminated ones included.
func (g *Group) listInstances(ctx context.Context) (map[string]ec2Info, error) {
	out := map[string]ec2Info{}
	p := ec2.NewDescribeInstancesPaginator(g.ec2, &ec2.DescribeInstancesInput{
		Filters:    []ec2types.Filter{{Name: aws.String("tag:" + groupTag), Values: []string{g.cfg.Name}}},
		MaxResults: aws.Int32(describePageSize),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, mapErr(err)
		}
		for _, r := range page.Reservations {
			for _, in := range r.Instances {
				info := ec2Info{launched: aws.ToTime(in.LaunchTime)}
				if in.State != nil {
					info.state = in.State.Name
				}
				out[aws.ToString(in.InstanceId)] = info
			}
		}
	}
	return out, nil
}

// Update lists the group's instances with their states, from the group's
// own listing (which decides membership) and EC2's (which knows whether a
// machine runs). An instance the group launched but does not list yet is
// not reported: berth counts it as a pending increase until it appears.
// An instance berth saw that has left the group is reported deleted once
// EC2 says it terminated.
//
// Update also protects every instance of the group from scale-in, so that
// neither the group's own scale-in nor AZ rebalancing can end a job; only
// berth's Decrease removes instances.
func (g *Group) Update(ctx context.Context, fn func(id string, s provider.State)) error {
	grp, err := g.describeGroup(ctx)
	if err != nil {
		return err
	}
	infos, err := g.listInstances(ctx)
	if err != nil {
		return err
	}
	now := g.now()
	type entry struct {
		id string
		st provider.State
	}
	var out []entry
	var unprotected []string
	g.mu.Lock()
	listed := map[string]bool{}
	for _, in := range grp.Instances {
		id := aws.ToString(in.InstanceId)
		info := infos[id]
		st := mapState(string(in.LifecycleState), info.state, g.inFlightLocked(id), info.launched, now, g.cfg.InstanceReadyTimeout)
		listed[id] = true
		if in.LifecycleState != asgtypes.LifecycleStatePending {
			delete(g.resumed, id) // back in service, or gone
		}
		if st != provider.StateDeleted {
			g.seen[id] = true
		}
		if needsProtection(in) {
			unprotected = append(unprotected, id)
		}
		out = append(out, entry{id, st})
	}
	for id, info := range infos {
		if listed[id] || !g.seen[id] {
			continue
		}
		switch info.state {
		case ec2types.InstanceStateNameShuttingDown:
			out = append(out, entry{id, provider.StateDeleting})
		case ec2types.InstanceStateNameTerminated:
			out = append(out, entry{id, provider.StateDeleted})
			// Reported once; EC2 keeps listing terminated instances
			// for about an hour.
			delete(g.seen, id)
			delete(g.hostKeys, id)
		}
	}
	g.mu.Unlock()
	for _, e := range out {
		fn(e.id, e.st)
	}
	g.protect(ctx, unprotected)
	return nil
}

func (g *Group) inFlightLocked(id string) op {
	switch {
	case g.resuming[id], g.resumed[id]:
		return opResume
	case g.suspending[id]:
		return opSuspend
	}
	return opNone
}

// needsProtection reports whether an instance berth holds lacks scale-in
// protection.
func needsProtection(in asgtypes.Instance) bool {
	if aws.ToBool(in.ProtectedFromScaleIn) {
		return false
	}
	switch in.LifecycleState {
	case asgtypes.LifecycleStateInService, asgtypes.LifecycleStatePending, asgtypes.LifecycleStateStandby:
		return true
	}
	return false
}

// protect sets scale-in protection on ids in batches. A failure is logged,
// not returned: the listing is still right, and the next Update tries
// again. A batch that fails is retried one by one, so that one instance
// the group refuses (one just leaving, say) does not leave the others
// unprotected.
func (g *Group) protect(ctx context.Context, ids []string) {
	for len(ids) > 0 {
		batch := ids[:min(len(ids), protectBatch)]
		ids = ids[len(batch):]
		_, err := g.asg.SetInstanceProtection(ctx, &autoscaling.SetInstanceProtectionInput{
			AutoScalingGroupName: aws.String(g.cfg.Name),
			InstanceIds:          batch,
			ProtectedFromScaleIn: aws.Bool(true),
		})
		switch {
		case err == nil:
			g.log.Info("protected instances from scale-in", "ids", batch)
		case len(batch) > 1 && !errors.Is(mapErr(err), ErrPermission):
			for _, id := range batch {
				g.protect(ctx, []string{id})
			}
		default:
			g.mu.Lock()
			first := !g.protWarned[batch[0]]
			g.protWarned[batch[0]] = true
			g.mu.Unlock()
			if first {
				g.log.Error("cannot protect instances from scale-in; the group's own scale-in could end their jobs", "ids", batch, "err", mapErr(err))
			}
		}
	}
}
