package gcpfake

import (
	"net/http"
	"time"
)

// Creation failures as Compute Engine reports them. A resize only sets
// the target size: "The resize operation is marked DONE if the resize
// request is successful. The underlying actions take additional time. You
// must separately verify the status of the creating or deleting actions
// with the listmanagedinstances method" (Compute Engine API reference,
// instanceGroupManagers.resize and regionInstanceGroupManagers.resize).
// An instance the group cannot create stays a member, listed with
// currentAction CREATING ("If the group fails to create this instance, it
// will try again until it is successful": ManagedInstance.currentAction,
// computepb v1.75.0), no id ("This field is empty when instance does not
// exist"), no instanceStatus ("empty when the instance does not exist"),
// but a name and URL ("The URL can exist even if the instance has not yet
// been created"), and the error of the last attempt in
// lastAttempt.errors.errors[] with a code and message
// (ManagedInstanceLastAttempt).

// Error codes of a failed creation attempt.
const (
	// CodeQuota: the project's regional quota (CPUS, instances, IP
	// addresses) does not allow another instance.
	CodeQuota = "QUOTA_EXCEEDED"
	// CodeStockout: the zone has no capacity for the machine type.
	CodeStockout = "ZONE_RESOURCE_POOL_EXHAUSTED"
)

// Stockout makes every attempt of the group to create an instance fail
// with code (CodeQuota, CodeStockout or any other), from now until
// Stockout(""): resizes still end DONE, and the members the group cannot
// create are listed CREATING with no id and the error in lastAttempt, and
// count in the target size. When it ends the group creates them, as its
// retries would.
func (c *Cloud) Stockout(code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stockout = code
	c.advanceLocked()
}

// attemptCreationLocked is the group's attempt to create in: during a
// stockout it fails and the instance does not exist; otherwise the
// instance exists after CreationLag and runs BootTime later.
func (c *Cloud) attemptCreationLocked(in *Instance, now time.Time) {
	if c.stockout != "" {
		in.Failing, in.Status, in.Action = c.stockout, "", ActionCreating
		in.until = time.Time{}
		return
	}
	in.Failing = ""
	in.Created, in.existsAt = now, now.Add(c.opts.CreationLag)
	c.transition(in, StatusProvisioning, ActionCreating, c.opts.CreationLag+c.opts.BootTime)
}

// retryCreationsLocked is the group retrying the members it failed to
// create: they are created once the stockout is over, and fail with the
// current code while it lasts.
func (c *Cloud) retryCreationsLocked(now time.Time) {
	for _, name := range c.order {
		if in := c.instances[name]; in != nil && !in.Gone && in.Failing != "" {
			c.attemptCreationLocked(in, now)
		}
	}
}

// exists reports whether the instance's VM exists: created, and not
// failing to be.
func (in *Instance) exists(now time.Time) bool {
	return in.Failing == "" && !now.Before(in.existsAt)
}

// lastAttempt is a failing member's ManagedInstanceLastAttempt.
func (c *Cloud) lastAttempt(in *Instance) map[string]any {
	msg := "The zone 'projects/" + c.opts.Project + "/zones/" + in.Zone + "' does not have enough resources available to fulfill the request. Try a different zone, or try again later."
	if in.Failing == CodeQuota {
		msg = "Quota 'CPUS' exceeded. Limit: 24.0 in region " + regionOf(in.Zone) + "."
	}
	return map[string]any{"errors": map[string]any{"errors": []map[string]string{{"code": in.Failing, "message": msg}}}}
}

// regionOf is a zone's region: europe-west1-b is in europe-west1.
func regionOf(zone string) string {
	for i := len(zone) - 1; i >= 0; i-- {
		if zone[i] == '-' {
			return zone[:i]
		}
	}
	return zone
}

// managedJSON is one ManagedInstance of listManagedInstances.
func (c *Cloud) managedJSON(in *Instance, now time.Time) map[string]any {
	mi := map[string]any{"instance": c.instanceLink(in), "name": in.Name, "currentAction": in.Action}
	if in.Failing != "" {
		mi["lastAttempt"] = c.lastAttempt(in)
	}
	if in.exists(now) {
		mi["id"], mi["instanceStatus"] = formatID(in.ID), in.Status
	}
	return mi
}

// shrinkFailingLocked drops up to n members the group failed to create,
// newest first, and returns how many it dropped: when it resizes down a
// group weighs "the status of the VM instance" (instanceGroupManagers.resize),
// and one that does not exist is removed at once, with nothing to delete.
func (c *Cloud) shrinkFailingLocked(n int) int {
	dropped := 0
	for i := len(c.order) - 1; i >= 0 && dropped < n; i-- {
		if in := c.instances[c.order[i]]; in != nil && !in.Gone && in.Failing != "" {
			in.Gone = true
			dropped++
		}
	}
	return dropped
}

// notCreatedYet is instances.get's and getGuestAttributes' answer for a
// member that does not exist yet.
func (c *Cloud) notCreatedYet(scope, name string) *apiError {
	return &apiError{http.StatusNotFound, "notFound", "The resource 'projects/" + c.opts.Project + "/" + scope + "/instances/" + name + "' was not found"}
}
