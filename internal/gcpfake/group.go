package gcpfake

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// groupScope is the scope ("zones/Z" or "regions/R") the group lives in.
func (c *Cloud) groupScope() string {
	if c.opts.Region != "" {
		return "regions/" + c.opts.Region
	}
	return "zones/" + c.opts.Zone
}

func (c *Cloud) groupLink() string {
	return selfLinkBase + "projects/" + c.opts.Project + "/" + c.groupScope() + "/instanceGroupManagers/" + c.group.name
}

func (c *Cloud) instanceLink(in *Instance) string {
	return selfLinkBase + "projects/" + c.opts.Project + "/zones/" + in.Zone + "/instances/" + in.Name
}

// callGroup serves the instance group manager's methods.
func (c *Cloud) callGroup(r *http.Request, rt route) (any, *apiError) {
	if rt.scope != c.groupScope() || rt.resource != c.group.name {
		return nil, notFound("The resource 'projects/%s/%s/instanceGroupManagers/%s' was not found", c.opts.Project, rt.scope, rt.resource)
	}
	if rt.verb == "" {
		return c.groupJSON(), nil
	}
	if rt.verb == "listManagedInstances" {
		return c.listManaged(r)
	}
	// Mutations carry a requestId: a retry of one that was applied gets
	// the same operation back instead of applying it twice.
	reqID := r.URL.Query().Get("requestId")
	if name, ok := c.requests[reqID]; ok && reqID != "" {
		return c.operationJSON(c.ops[name]), nil
	}
	var body struct {
		Instances                      []string `json:"instances"`
		SkipInstancesOnValidationError bool     `json:"skipInstancesOnValidationError"`
	}
	if rt.verb != "resize" {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			return nil, badRequest("Invalid JSON payload received. %v", err)
		}
		if len(body.Instances) == 0 || len(body.Instances) > 1000 {
			return nil, badRequest("Invalid value for field 'instances': give 1 to 1000 instance URLs")
		}
	}
	var err *apiError
	switch rt.verb {
	case "resize":
		err = c.resize(r)
	case "deleteInstances":
		err = c.eachMember(body.Instances, body.SkipInstancesOnValidationError, c.deleteOne)
	case "suspendInstances":
		err = c.eachMember(body.Instances, false, c.suspendOne)
	case "resumeInstances":
		err = c.eachMember(body.Instances, false, c.resumeOne)
	default:
		return nil, notFound("gcpfake does not implement instanceGroupManagers.%s", rt.verb)
	}
	if err != nil {
		return nil, err
	}
	op := c.newOperation(rt)
	if reqID != "" {
		c.requests[reqID] = op.name
	}
	c.advanceLocked()
	return c.operationJSON(op), nil
}

func (c *Cloud) resize(r *http.Request) *apiError {
	size, err := strconv.Atoi(r.URL.Query().Get("size"))
	if err != nil || size < 0 {
		return badRequest("Invalid value for field 'size': '%s'. Must be a non-negative integer", r.URL.Query().Get("size"))
	}
	c.group.targetSize = size
	// Shrinking drops the members that could not be created first, then
	// deletes the newest instances that are not suspended.
	live := 0
	for _, name := range c.order {
		if in := c.instances[name]; in != nil && !in.Gone && in.Action != ActionDeleting && in.Status != StatusSuspended && in.Action != ActionSuspend {
			live++
		}
	}
	live -= c.shrinkFailingLocked(live - size)
	for i := len(c.order) - 1; i >= 0 && live > size; i-- {
		if in := c.instances[c.order[i]]; in != nil && !in.Gone && in.Action != ActionDeleting && in.Status != StatusSuspended && in.Action != ActionSuspend {
			c.stopSSHLocked(in)
			c.transition(in, StatusStopping, ActionDeleting, c.opts.StopTime)
			live--
		}
	}
	return nil
}

// eachMember applies fn to each instance URL's instance, refusing the
// whole request when one is not a member (unless skip is set).
func (c *Cloud) eachMember(urls []string, skip bool, fn func(*Instance) *apiError) *apiError {
	var ins []*Instance
	for _, u := range urls {
		in := c.memberLocked(u)
		if in == nil {
			if skip {
				continue
			}
			return badRequest("The instance '%s' is not a member of instance group manager '%s'", u, c.group.name)
		}
		ins = append(ins, in)
	}
	for _, in := range ins {
		if err := fn(in); err != nil {
			if skip {
				continue
			}
			return err
		}
	}
	return nil
}

// memberLocked finds the instance a URL (full, or zones/Z/instances/N)
// names, if the group holds it.
func (c *Cloud) memberLocked(u string) *Instance {
	i := strings.Index(u, "zones/")
	if i < 0 {
		return nil
	}
	seg := strings.Split(u[i:], "/")
	if len(seg) != 4 || seg[2] != "instances" {
		return nil
	}
	in := c.instances[seg[3]]
	if in == nil || in.Gone || in.Zone != seg[1] || c.now().Before(in.visibleAt) {
		return nil
	}
	return in
}

func (c *Cloud) deleteOne(in *Instance) *apiError {
	if in.Action == ActionDeleting {
		return badRequest("The instance '%s' is already being deleted", in.Name)
	}
	if in.Failing != "" {
		// Not created: nothing to delete, the member goes at once.
		c.group.targetSize--
		in.Gone = true
		return nil
	}
	if in.Status == StatusSuspended || in.Action == ActionSuspend {
		c.group.targetSusp--
	} else {
		c.group.targetSize--
	}
	c.stopSSHLocked(in)
	c.transition(in, StatusStopping, ActionDeleting, c.opts.StopTime)
	return nil
}

func (c *Cloud) suspendOne(in *Instance) *apiError {
	if !suspendable(c.opts.MachineType) {
		return &apiError{http.StatusBadRequest, "unsupportedOperation", "Suspend is not supported for instances of machine type " + c.opts.MachineType + " (GPUs or more than 208 GB of memory)"}
	}
	if in.Status != StatusRunning || in.Action != ActionNone {
		return badRequest("The instance '%s' cannot be suspended: it is %s (%s)", in.Name, in.Status, in.Action)
	}
	c.group.targetSize--
	c.group.targetSusp++
	c.stopSSHLocked(in)
	c.transition(in, StatusSuspending, ActionSuspend, c.opts.StopTime)
	return nil
}

func (c *Cloud) resumeOne(in *Instance) *apiError {
	if in.Status != StatusSuspended {
		return badRequest("The instance '%s' cannot be resumed: it is %s, not SUSPENDED", in.Name, in.Status)
	}
	c.group.targetSusp--
	c.group.targetSize++
	c.transition(in, StatusStaging, ActionResume, c.opts.BootTime)
	return nil
}

// listManaged serves listManagedInstances: the group's instances that are
// visible yet, with status and current action, paginated.
func (c *Cloud) listManaged(r *http.Request) (any, *apiError) {
	var items []map[string]any
	for _, name := range c.order {
		in := c.instances[name]
		if in == nil || in.Gone || c.now().Before(in.visibleAt) {
			continue
		}
		if len(items) > 0 && items[len(items)-1]["name"] == name {
			continue // recreated under the same name
		}
		items = append(items, c.managedJSON(in, c.now()))
	}
	start, end, next, err := c.page(r, len(items))
	if err != nil {
		return nil, err
	}
	out := map[string]any{"managedInstances": items[start:end]}
	if next != "" {
		out["nextPageToken"] = next
	}
	return out, nil
}

func (c *Cloud) groupJSON() map[string]any {
	g := map[string]any{
		"kind": "compute#instanceGroupManager", "name": c.group.name, "selfLink": c.groupLink(),
		"baseInstanceName": c.group.name, "targetSize": c.group.targetSize, "targetSuspendedSize": c.group.targetSusp,
		"targetStoppedSize":           0,
		"instanceTemplate":            selfLinkBase + "projects/" + c.opts.Project + "/" + c.group.templateScope + "/instanceTemplates/" + c.group.template,
		"listManagedInstancesResults": "PAGINATED",
	}
	if c.opts.Region != "" {
		g["region"] = selfLinkBase + "projects/" + c.opts.Project + "/regions/" + c.opts.Region
		var zones []map[string]string
		for _, z := range c.group.zones {
			zones = append(zones, map[string]string{"zone": selfLinkBase + "projects/" + c.opts.Project + "/zones/" + z})
		}
		g["distributionPolicy"] = map[string]any{"zones": zones}
	} else {
		g["zone"] = selfLinkBase + "projects/" + c.opts.Project + "/zones/" + c.opts.Zone
	}
	return g
}

func (c *Cloud) metadataItems() []map[string]string {
	items := []map[string]string{{"key": "ssh-keys", "value": c.opts.Username + ":" + c.opts.AuthorizedKey}}
	if !c.opts.NoGuestAttributes {
		items = append(items, map[string]string{"key": "enable-guest-attributes", "value": "TRUE"})
	}
	return items
}

func (c *Cloud) scheduling() map[string]any {
	if c.opts.Spot {
		return map[string]any{"preemptible": true, "provisioningModel": "SPOT", "automaticRestart": false, "instanceTerminationAction": "STOP"}
	}
	return map[string]any{"preemptible": false, "provisioningModel": "STANDARD", "automaticRestart": true, "onHostMaintenance": "MIGRATE"}
}

func (c *Cloud) templateJSON() map[string]any {
	return map[string]any{"kind": "compute#instanceTemplate", "name": c.group.template, "properties": map[string]any{
		"machineType": c.opts.MachineType, "scheduling": c.scheduling(), "metadata": map[string]any{"items": c.metadataItems()},
	}}
}

// instanceLocked finds an instance by zone scope and name, as instances.get
// does: deleted ones are not found.
func (c *Cloud) instanceLocked(scope, name string) (*Instance, *apiError) {
	in := c.instances[name]
	if in == nil || in.Gone || "zones/"+in.Zone != scope || !in.exists(c.now()) {
		return nil, c.notCreatedYet(scope, name)
	}
	return in, nil
}

func (c *Cloud) instanceJSON(in *Instance) map[string]any {
	items := append(c.metadataItems(), map[string]string{"key": "created-by", "value": "projects/" + c.opts.Project + "/" + c.groupScope() + "/instanceGroupManagers/" + c.group.name})
	return map[string]any{
		"kind": "compute#instance", "id": formatID(in.ID), "name": in.Name, "selfLink": c.instanceLink(in),
		"zone":              selfLinkBase + "projects/" + c.opts.Project + "/zones/" + in.Zone,
		"status":            in.Status,
		"machineType":       selfLinkBase + "projects/" + c.opts.Project + "/zones/" + in.Zone + "/machineTypes/" + c.opts.MachineType,
		"creationTimestamp": in.Created.Format(time.RFC3339Nano),
		"networkInterfaces": []map[string]any{{"name": "nic0", "networkIP": in.PrivateIP,
			"accessConfigs": []map[string]any{{"name": "External NAT", "type": "ONE_TO_ONE_NAT", "natIP": in.PublicIP}}}},
		"metadata":   map[string]any{"fingerprint": "ZmFrZQ==", "items": items},
		"scheduling": c.scheduling(),
	}
}

// guestAttributes serves getGuestAttributes for the hostkeys/ namespace,
// which the guest agent fills with the instance's SSH host keys at boot.
func (c *Cloud) guestAttributes(r *http.Request, rt route) (any, *apiError) {
	in, err := c.instanceLocked(rt.scope, rt.resource)
	if err != nil {
		return nil, err
	}
	if c.opts.NoGuestAttributes {
		return nil, notFound("Guest attributes are not enabled for instance '%s': set metadata enable-guest-attributes = TRUE", in.Name)
	}
	q := r.URL.Query().Get("queryPath")
	if q != "hostkeys/" && q != "hostkeys" {
		return nil, notFound("The guest attribute path '%s' was not found", q)
	}
	// The guest agent writes the keys once the VM has booted: before,
	// the namespace is empty (cloud.google.com/compute/docs/metadata/
	// manage-guest-attributes: the guest environment publishes
	// hostkeys/ at startup).
	if in.keysAt.IsZero() || c.now().Before(in.keysAt) {
		return nil, notFound("The guest attribute path '%s' of instance '%s' was not found", q, in.Name)
	}
	pub := in.signer.PublicKey()
	return map[string]any{"kind": "compute#guestAttributes", "queryPath": q, "queryValue": map[string]any{
		"items": []map[string]string{{"namespace": "hostkeys", "key": pub.Type(), "value": base64.StdEncoding.EncodeToString(pub.Marshal())}},
	}}, nil
}

// machineTypes the fake knows, with what decides whether they can suspend.
var machineTypes = map[string]struct {
	memoryMB, cpus int
	gpus           int
}{
	"e2-small": {2048, 2, 0}, "e2-standard-4": {16384, 4, 0}, "n2-standard-8": {32768, 8, 0},
	"a2-highgpu-1g": {87040, 12, 1}, "m1-megamem-96": {1468006, 96, 0},
}

// suspendable reports whether GCE can suspend a machine type: not with
// GPUs, not with more than 208 GB of memory.
func suspendable(mt string) bool {
	t, ok := machineTypes[mt]
	return !ok || (t.gpus == 0 && t.memoryMB <= 208*1024)
}

func machineTypeJSON(scope, name string) (any, *apiError) {
	t, ok := machineTypes[name]
	if !ok {
		return nil, notFound("The resource 'projects/p/%s/machineTypes/%s' was not found", scope, name)
	}
	out := map[string]any{"kind": "compute#machineType", "name": name, "memoryMb": t.memoryMB, "guestCpus": t.cpus}
	if t.gpus > 0 {
		out["accelerators"] = []map[string]any{{"guestAcceleratorType": "nvidia-tesla-a100", "guestAcceleratorCount": t.gpus}}
	}
	return out, nil
}

func formatID(id uint64) string { return strconv.FormatUint(id, 10) }
