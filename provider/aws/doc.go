// Package aws is berth's provider for an EC2 Auto Scaling group, built on
// aws-sdk-go-v2.
//
// # Use
//
// New returns an uninitialised Group; Init takes provider_config as JSON
// (see Config and ParseConfig for the keys) and checks that the group
// exists. It is not registered as a built-in: berth's berth-provider-aws
// binary serves it over the plugin protocol, and tests use it in-process:
//
//	g := aws.New()
//	info, err := g.Init(ctx, provider.Settings{Config: []byte(`{"name": "ci", "region": "eu-west-1",
//		"connector": {"username": "ec2-user", "key_path": "/etc/berth/ci.pem"}}`)})
//
// Credentials come from the SDK's default chain (environment, shared
// files, SSO, web identity, instance role), or from the named profile.
// The endpoint key points every client at another endpoint; production
// code does not otherwise know where it talks to.
//
// # Scaling
//
// Increase raises DesiredCapacity by what MaxSize allows (keeping room for
// instances parked in Standby) and reports how many it added; the group
// launches them. Decrease calls TerminateInstanceInAutoScalingGroup with
// ShouldDecrementDesiredCapacity, so the group never replaces what berth
// removed. Calls that change desired capacity are serialised, because each
// reads it and writes it back.
//
// Every instance berth holds gets scale-in protection (set by Update), so
// neither the group's own scale-in (a scaling policy, someone lowering
// desired capacity) nor AZ rebalancing ends a job. The group may still
// replace an instance that fails its health check; berth sees it go and
// adopts the replacement.
//
// # States
//
// Update lists the group (DescribeAutoScalingGroups, for membership and
// lifecycle) and EC2 (DescribeInstances filtered by the group's tag, for
// machine state), both paginated, and maps them:
//
//	Pending*, or InService while EC2 is pending   creating (timeout after instance_ready_timeout)
//	InService and running                          running
//	EnteringStandby; Standby and running/stopping  suspending
//	Standby and stopped; Warmed:*                  suspended
//	Standby and pending; a Resume in flight        resuming
//	Terminating*, Detaching; shutting-down         deleting
//	Terminated, Detached; terminated               deleted
//
// An instance the group launched but does not list yet (its listing is
// eventually consistent) is not reported; berth counts Increase's return
// value as pending until it appears.
//
// # Suspend
//
// With suspend = true, Suspend moves an instance to Standby (decrementing
// desired capacity, so no replacement is launched) and stops it; Resume
// starts it, waits until it runs and moves it out of Standby. A stopped
// instance is billed only for its EBS volumes and any Elastic IP, not for
// compute; resuming takes as long as an EC2 start (tens of seconds) rather
// than a boot from an AMI. Hibernation (hibernate = true) keeps memory too,
// at the cost of an EBS root volume as large as RAM. A warm pool is not
// used: its instances belong to the group, not to a parked environment.
// Instances with instance-store roots or one-time Spot cannot stop: Init
// refuses suspend = true for a group with a Spot share, and a failed stop
// is ErrUnsupported. With suspend off, Suspend fails with ErrUnsupported.
//
// # Host keys
//
// ConnectInfo reads the host key from the console output, where cloud-init
// prints it; see ConnectInfo for the fallbacks.
//
// # Errors
//
// API errors are mapped to the Err* values with what to do: a missing IAM
// permission names the action to add (autoscaling:SetDesiredCapacity, ...);
// MaxSize and MinSize refusals give the numbers; throttling that outlasts
// the SDK's standard retryer is ErrThrottled.
package aws
