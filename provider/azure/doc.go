// Package azure is berth's provider for an Azure virtual machine scale set
// (Uniform orchestration), built on the Azure SDK for Go (armcompute,
// azcore, azidentity).
//
// # Use
//
// New returns an uninitialised Group; Init takes provider_config as JSON
// (see Config and ParseConfig for the keys), checks that the scale set
// exists, and that the private key it was given matches one of the SSH
// public keys of the set's OS profile. It is not registered as a built-in:
// berth's berth-provider-azure binary serves it over the plugin protocol,
// and tests use it in-process:
//
//	g := azure.New()
//	info, err := g.Init(ctx, provider.Settings{Config: []byte(`{"subscription_id": "...",
//		"resource_group": "ci", "name": "berth-ci", "connector": {"key_path": "/etc/berth/ci.pem"}}`)})
//
// Credentials come from Azure's default chain (azidentity's
// DefaultAzureCredential: a service principal in the environment,
// workload identity, managed identity, Azure CLI). The endpoint,
// authority_host and ca_file keys point it at another cloud (Azure Stack
// Hub, or the fake of package internal/azurefake); production code does
// not otherwise know where it talks to.
//
// # Scaling
//
// Increase raises the set's sku.capacity by what max_size allows and
// reports how many it added; the set creates them. Decrease calls
// deleteInstances, which lowers the capacity by as many, so the set never
// replaces what berth removed. Calls that change the capacity are
// serialised, because Increase reads it and writes it back. The capacity
// counts deallocated (suspended) instances, so their room stays theirs.
//
// Scale-out, deletes and deallocations are long-running operations: the
// provider returns once Azure accepted them and polls them to the end in
// the background (following Azure-AsyncOperation and Retry-After), logging
// how they ended; the listing shows their effect meanwhile. Resume waits
// for its start operation to finish.
//
// # States
//
// Update lists the set's instances with their instance views (expand =
// instanceView), following nextLink, and maps provisioning and power
// states (see mapState):
//
//	creating, or starting a new instance         creating (timeout after instance_ready_timeout)
//	succeeded and running                        running
//	deallocating, stopping, stopped              suspending
//	deallocated                                  suspended
//	starting after a start                       resuming
//	deleting                                     deleting
//	failed (and not deallocated)                 timeout
//	no longer listed                             deleted
//
// # Suspend
//
// With suspend = true, Suspend deallocates an instance and Resume starts
// it. A deallocated instance is billed only for its managed disks; its
// files survive, and its private address usually does too (dynamic
// public addresses do not). Starting takes tens of seconds, and can fail
// for lack of capacity in the region, or for Spot at the price; the
// instance then stays suspended. Spot sets must use eviction policy
// Delete: Init refuses Deallocate, under which an evicted instance would
// look like a suspended one.
//
// # Host keys
//
// ConnectInfo reads the host key from the serial console log that boot
// diagnostics keep, where cloud-init prints it; see hostKey.
//
// # Errors
//
// API errors are mapped to the Err* values with what to do: a missing RBAC
// permission names the action to add; throttling (429 with Retry-After,
// which the SDK's retry policy honours) that outlasts the SDK's retries is
// ErrThrottled and transient.
package azure
