// Package gcpfake is an in-process fake of the parts of the Compute Engine
// API (v1, REST) that berth's Google Cloud provider uses, served over real
// HTTP: the provider is pointed at it only through its endpoint override
// and a service account key file, and cannot tell it from Google.
//
// # What it implements
//
// Exactly the calls the provider makes, with the documented JSON shapes:
// Google's error envelope ({"error": {"code", "message", "errors":
// [{"reason"}], "status"}}), Operation resources polled through
// zoneOperations.get and regionOperations.get, pageToken/maxResults
// pagination, and requestId deduplication of mutations.
//
//	instanceGroupManagers and regionInstanceGroupManagers: get, resize,
//	    deleteInstances, listManagedInstances, suspendInstances,
//	    resumeInstances
//	instances: get, getGuestAttributes (hostkeys/)
//	instanceTemplates, regionInstanceTemplates, machineTypes: get
//	zoneOperations, regionOperations: get
//
// Every call needs an access token from the fake's OAuth 2.0 token
// endpoint, which takes the JWT bearer grant signed with the key of the
// file ServiceAccountKey returns, as Google's does.
//
// # Behaviour
//
// The group converges on its target size the way a managed instance group
// does, creating instances when it holds fewer (suspended ones and those
// being deleted do not count). Mutations apply when asked; their
// operations stay RUNNING for Options.OperationTime. Instances appear in
// listManagedInstances Options.ListingLag after creation, boot for
// Options.BootTime and suspend or delete for Options.StopTime. Every
// running instance serves real SSH (golang.org/x/crypto/ssh) on its
// internal and external address, both loopback addresses 127.x.y.z on one
// port, with its own host key (published in its guest attributes),
// running commands with sh in a home directory that survives suspend and
// resume.
//
// Tests inject faults with Throttle, Deny, FailOperations, Preempt and
// Stockout (creation failures as Google reports them: the resize DONE, the
// members listed CREATING with no id and the error in lastAttempt;
// stockout.go), and Hold a method's calls on their way (a call that never
// arrives: dropped with no effect when its caller goes away; hold.go), and
// inspect the project with Group, Instance and Calls.
// CreationLag lists a new instance with no id before it exists;
// AgentDelay delays the host keys in its guest attributes after boot.
package gcpfake
