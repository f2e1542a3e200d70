// Package awsfake is an in-process fake of the parts of AWS that berth's AWS
// provider uses: the Auto Scaling query API (Version 2011-01-01), the EC2
// query API (Version 2016-11-15) and EC2 Instance Connect (JSON 1.1), served
// over real HTTP from one endpoint, as LocalStack-style local stacks do. The
// provider is pointed at it only through its endpoint override; it cannot
// tell it from AWS.
//
// # What it implements
//
// Exactly the calls the provider makes, following AWS's documented wire
// protocol: form-encoded requests with Action and Version; XML responses in
// each service's namespace; the awsquery error envelope
// (<ErrorResponse><Error><Code>) for Auto Scaling and the ec2query one
// (<Response><Errors><Error><Code>) for EC2; NextToken/MaxRecords and
// nextToken/MaxResults pagination. Requests must carry a SigV4 Authorization
// header; signatures are not checked.
//
//	Auto Scaling: DescribeAutoScalingGroups, SetDesiredCapacity,
//	    TerminateInstanceInAutoScalingGroup, SetInstanceProtection,
//	    EnterStandby, ExitStandby
//	EC2: DescribeInstances, StopInstances, StartInstances, GetConsoleOutput
//	EC2 Instance Connect: SendSSHPublicKey
//
// # Behaviour
//
// A group converges on its desired capacity the way an Auto Scaling group
// does: it launches instances when it holds fewer than desired (counting
// Pending and InService, not Standby or Terminating), and terminates
// unprotected instances when it holds more; protected ones are never picked,
// so a group whose instances are all protected stays above desired. An
// InService instance that is unhealthy or whose EC2 state is not running is
// terminated and replaced, as the group's EC2 health check does.
//
// Instances are visible in listings only Options.ListingLag after launch
// (eventual consistency), boot for Options.BootTime, and terminate for
// Options.TerminateTime. Every running instance serves real SSH (package
// golang.org/x/crypto/ssh) on its private and public address, both loopback
// addresses 127.x.y.z on one port, with its own host key, running commands
// with sh in a home directory that survives stop and start like an EBS root
// volume. Its console output carries the host key blocks cloud-init prints.
//
// Tests inject faults with Throttle, Deny and MarkUnhealthy, and inspect the
// cloud with Group and Instance.
package awsfake
