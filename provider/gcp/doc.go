// Package gcp is berth's provider for a Compute Engine managed instance
// group (zonal or regional), built on cloud.google.com/go/compute's REST
// clients.
//
// # Use
//
// New returns an uninitialised Group; Init takes provider_config as JSON
// (see Config and ParseConfig) and checks that the group exists. berth's
// berth-provider-gcp binary serves it over the plugin protocol; tests use
// it in-process.
//
// Credentials are application default credentials
// (GOOGLE_APPLICATION_CREDENTIALS, gcloud's application-default login, the
// metadata server), or the service account key file named by
// credentials_file. The endpoint
// key points every client elsewhere (a fake, a Private Service Connect
// endpoint).
//
// # Scaling
//
// Increase resizes the group to its target size plus what max_size allows
// (suspended instances keep their room); Decrease calls deleteInstances,
// which lowers the target size so the group replaces nothing. Every
// mutation carries a requestId, so a retry applies once, and its
// operation is polled until DONE; an operation that ends in a quota error
// wraps provider.ErrTransient. Rate refusals (429, 403 rateLimitExceeded)
// are retried with backoff, then returned as ErrThrottled wrapping
// provider.ErrTransient.
//
// A resize ends DONE even when the group cannot create the instances: the
// failures show only in listManagedInstances, as members with no ID and an
// error in lastAttempt. Increase therefore watches the new members for up
// to creation_check, deletes the ones that failed (so the group does not
// create them when capacity returns) and returns ErrQuota or ErrStockout,
// both transient, then answers with that failure for a backoff that grows
// from 10 s to 2 minutes (creation.go). Update gives back members that fail
// later in the same way.
//
// # States
//
// Update pages through listManagedInstances. An instance's berth ID is its
// numeric Compute Engine ID, which changes when the group recreates a VM
// (a preempted Spot VM, autohealing): berth sees the old one deleted and
// adopts the new one. The current action wins over the status:
//
//	CREATING, VERIFYING, ...; PROVISIONING, STAGING               creating (timeout after instance_ready_timeout)
//	NONE and RUNNING                                               running
//	SUSPENDING                                                     suspending
//	SUSPENDED                                                      suspended
//	RESUMING                                                       resuming
//	DELETING, ABANDONING, RECREATING; STOPPED, TERMINATED, ...     deleting
//	no longer listed                                               deleted
//
// # Suspend
//
// With suspend = true, Suspend and Resume call the group's
// suspendInstances and resumeInstances: memory and disk are kept, and the
// group moves the instance between its target size and its target
// suspended size. Init refuses suspend = true for a template whose VMs
// cannot suspend (GPUs, more than 208 GB of memory).
//
// # Host keys
//
// ConnectInfo reads the SSH host keys the guest agent publishes in the
// instance's guest attributes (hostkeys/); without them the host key is
// left empty and berth trusts the first key it sees.
package gcp
