// Package azurefake is an in-process fake of the parts of Azure that
// berth's Azure provider uses: the Azure Resource Manager (ARM) REST API of
// one Uniform virtual machine scale set (Microsoft.Compute, api-version
// 2025-04-01, and the two Microsoft.Network listings of its instances'
// addresses), and a Microsoft Entra ID token endpoint for the
// client-credentials flow. The provider is pointed at it only through its
// endpoint, authority host and CA settings; it cannot tell it from Azure.
//
// # Why TLS
//
// azcore sends bearer tokens only over HTTPS, and MSAL talks to an
// authority only over HTTPS, so the fake serves TLS with a certificate of
// its own (httptest's, for 127.0.0.1). CACertPEM returns it; the provider
// trusts it through its ca_file setting, which exists for private clouds
// (Azure Stack Hub) and TLS-inspecting proxies just the same.
//
// # What it implements
//
// Exactly the calls the provider makes, with ARM's documented shapes:
// api-version required on every call; JSON bodies; errors as
// {"error": {"code", "message"}} with the x-ms-error-code header; lists as
// {"value": [...], "nextLink"}; long-running operations answered with
// Azure-AsyncOperation (an operation status resource: InProgress, then
// Succeeded or Failed) and Location headers, with Retry-After telling the
// poller when to look again; throttling as 429 with Retry-After.
//
//	GET    .../virtualMachineScaleSets/{name}                       the set
//	PATCH  .../virtualMachineScaleSets/{name}                       sku.capacity (LRO)
//	POST   .../virtualMachineScaleSets/{name}/delete                deleteInstances (LRO)
//	POST   .../virtualMachineScaleSets/{name}/deallocate            (LRO)
//	POST   .../virtualMachineScaleSets/{name}/start                 (LRO)
//	GET    .../virtualMachineScaleSets/{name}/virtualMachines       $expand=instanceView, paged
//	GET    .../virtualMachineScaleSets/{name}/virtualMachines/{id}
//	POST   .../virtualMachines/{id}/retrieveBootDiagnosticsData     serial log SAS URI
//	GET    .../virtualMachines/{id}/networkInterfaces               private addresses
//	GET    .../virtualMachineScaleSets/{name}/publicipaddresses     public addresses
//	POST   /{tenant}/oauth2/v2.0/token                              client credentials
//	GET    /{tenant}/v2.0/.well-known/openid-configuration
//
// # Behaviour
//
// The set holds sku.capacity instances: raising it launches instances
// (provisioning Creating, power starting, for Options.BootTime);
// deleteInstances removes the named ones and lowers the capacity by as
// many, so nothing replaces them; lowering the capacity by PATCH deletes
// the highest instance IDs, as the default scale-in policy does.
// Deallocate and start move instances through deallocating and starting.
// New instances appear in listings only Options.ListingLag after launch.
//
// Every running instance serves real SSH (package golang.org/x/crypto/ssh)
// on its private and public address, both loopback addresses 127.x.y.z on
// one port, with its own host key, running commands with sh in a home
// directory that survives deallocation like a managed OS disk. Its serial
// console log (boot diagnostics) carries the host key blocks cloud-init
// prints.
//
// Tests inject faults with Throttle, Deny and FailNext, and inspect the
// cloud with Capacity, Instance and Instances.
package azurefake
