package azurefake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// scaleSetJSON is the set as GET returns it: the parts of the
// VirtualMachineScaleSet resource the provider reads, and enough around
// them to look like one.
func (c *Cloud) scaleSetJSON(provisioning string) map[string]any {
	o := c.opts
	vmProfile := map[string]any{
		"osProfile": map[string]any{
			"computerNamePrefix": o.ScaleSet,
			"adminUsername":      o.AdminUsername,
			"linuxConfiguration": map[string]any{
				"disablePasswordAuthentication": true,
				"ssh": map[string]any{"publicKeys": []map[string]string{
					{"path": "/home/" + o.AdminUsername + "/.ssh/authorized_keys", "keyData": o.AuthorizedKey + "\n"},
				}},
				"provisionVMAgent": true,
			},
		},
		"storageProfile": map[string]any{
			"imageReference": map[string]string{"publisher": "Canonical", "offer": "ubuntu-24_04-lts", "sku": "server", "version": "latest"},
			"osDisk":         map[string]any{"createOption": "FromImage", "caching": "ReadWrite", "managedDisk": map[string]string{"storageAccountType": "Premium_LRS"}},
		},
		"diagnosticsProfile": map[string]any{"bootDiagnostics": map[string]bool{"enabled": true}},
		"priority":           "Regular",
	}
	if o.Spot {
		vmProfile["priority"] = "Spot"
		vmProfile["evictionPolicy"] = o.EvictionPolicy
		vmProfile["billingProfile"] = map[string]float64{"maxPrice": -1}
	}
	return map[string]any{
		"id": c.scaleSetID(), "name": o.ScaleSet, "type": "Microsoft.Compute/virtualMachineScaleSets", "location": o.Location,
		"sku": map[string]any{"name": o.VMSize, "tier": "Standard", "capacity": c.capacity},
		"properties": map[string]any{
			"orchestrationMode":                      "Uniform",
			"singlePlacementGroup":                   false,
			"overprovision":                          !o.NoOverprovision,
			"doNotRunExtensionsOnOverprovisionedVMs": false,
			"upgradePolicy":                          map[string]string{"mode": "Manual"},
			"provisioningState":                      provisioning,
			"uniqueId":                               "33333333-3333-3333-3333-333333333333",
			"virtualMachineProfile":                  vmProfile,
		},
	}
}

// updateScaleSet applies a PATCH: only sku.capacity changes; the
// operation ends when the instances it launched have booted.
func (c *Cloud) updateScaleSet(w http.ResponseWriter, r *http.Request) {
	var body struct {
		SKU *struct {
			Capacity *int `json:"capacity"`
		} `json:"sku"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, errorf(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: %v", err))
		return
	}
	done := time.Now()
	if body.SKU != nil && body.SKU.Capacity != nil {
		n := *body.SKU.Capacity
		if n < 0 || n > c.opts.MaxCapacity {
			writeError(w, errorf(http.StatusBadRequest, "InvalidParameter", "The value %d of parameter 'sku.capacity' is out of range. The value must be between 0 and %d, inclusive. Target: 'sku.capacity'.", n, c.opts.MaxCapacity))
			return
		}
		if err := c.quotaLocked(n); err != nil {
			writeError(w, err)
			return
		}
		if n > c.capacity {
			done = done.Add(c.opts.BootTime)
		}
		// An allocation failure fails the operation and leaves the
		// instances it could not allocate in the set (failures.go).
		code := c.opts.AllocationFailure
		if e, ok := c.failNext["UpdateScaleSet"]; ok && isAllocationCode(e.code) {
			code = e.code
		}
		if code != "" && n > c.capacity {
			c.failNext["UpdateScaleSet"] = apiError{status: 200, code: code, message: allocationMessage(code)}
			done = time.Now()
		}
		c.launchFailure = code
		c.capacity = n
		c.advanceLocked()
		c.launchFailure = ""
	}
	c.startOperation(w, "UpdateScaleSet", done, http.StatusOK, c.scaleSetJSON("Updating"))
}

// instanceAction applies deleteInstances, deallocate or start to the
// instances named in the body.
func (c *Cloud) instanceAction(w http.ResponseWriter, r *http.Request, action string) {
	var body struct {
		InstanceIDs []string `json:"instanceIds"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			writeError(w, errorf(http.StatusBadRequest, "InvalidRequestContent", "The request content was invalid and could not be deserialized: %v", err))
			return
		}
	}
	if len(body.InstanceIDs) == 0 {
		// ARM applies deallocate and start to every instance when none
		// is named; deleteInstances requires them. The provider always
		// names them, so the fake refuses both forms rather than
		// deallocate a whole fleet by mistake.
		writeError(w, errorf(http.StatusBadRequest, "InvalidParameter", "Required parameter 'instanceIds' is missing (null)."))
		return
	}
	var targets []*Instance
	for _, id := range body.InstanceIDs {
		in, ok := c.instances[id]
		if !ok || in.Gone {
			writeError(w, errorf(http.StatusBadRequest, "InvalidParameter", "The provided instanceId %s is not an active Virtual Machine Scale Set VM instanceId.", id))
			return
		}
		targets = append(targets, in)
	}
	now := time.Now()
	done := now
	_, failing := c.failNext[action]
	for _, in := range targets {
		switch action {
		case "DeleteInstances":
			if in.Provisioning == ProvisioningDeleting {
				continue
			}
			c.capacity--
			c.deleteLocked(in, now)
			done = now.Add(c.opts.DeleteTime)
		case "Deallocate":
			if in.Power == PowerDeallocated || in.Power == PowerDeallocating || in.Provisioning == ProvisioningDeleting {
				continue
			}
			c.stopSSHLocked(in)
			c.transitionLocked(in, ProvisioningUpdating, PowerDeallocating, c.opts.DeallocateTime, now)
			done = now.Add(c.opts.DeallocateTime)
		case "Start":
			if in.Power == PowerRunning || in.Power == PowerStarting || in.Provisioning == ProvisioningDeleting {
				continue
			}
			if failing {
				// An allocation failure leaves the instance deallocated.
				done = now.Add(c.opts.StartTime)
				continue
			}
			c.transitionLocked(in, ProvisioningUpdating, PowerStarting, c.opts.StartTime, now)
			done = now.Add(c.opts.StartTime)
		}
	}
	c.advanceLocked()
	c.startOperation(w, action, done, http.StatusAccepted, nil)
}

// visibleLocked lists the instances the listing shows: launched at least
// ListingLag ago and not gone.
func (c *Cloud) visibleLocked() []*Instance {
	now := time.Now()
	var out []*Instance
	for _, id := range c.order {
		in := c.instances[id]
		if !in.Gone && !now.Before(in.visibleAt) {
			out = append(out, in)
		}
	}
	return out
}

// vmJSON is one VirtualMachineScaleSetVM, with its instance view when
// expand is set.
func (c *Cloud) vmJSON(in *Instance, expand bool) map[string]any {
	props := map[string]any{
		"latestModelApplied": true,
		"vmId":               fmt.Sprintf("44444444-4444-4444-4444-%012s", in.InstanceID),
		"provisioningState":  in.Provisioning,
		"timeCreated":        in.Created.UTC().Format(time.RFC3339Nano),
		"osProfile":          map[string]any{"computerName": fmt.Sprintf("%s%06s", c.opts.ScaleSet, in.InstanceID), "adminUsername": c.opts.AdminUsername},
		"networkProfile": map[string]any{"networkInterfaces": []map[string]any{{
			"id": c.scaleSetID() + "/virtualMachines/" + in.InstanceID + "/networkInterfaces/" + c.opts.ScaleSet + "-nic",
		}}},
	}
	if expand {
		now := time.Now().UTC().Format(time.RFC3339Nano)
		statuses := []map[string]string{
			{"code": "ProvisioningState/" + strings.ToLower(in.Provisioning), "level": "Info", "displayStatus": "Provisioning " + strings.ToLower(in.Provisioning), "time": now},
		}
		if in.FailureCode != "" {
			statuses[0] = map[string]string{"code": "ProvisioningState/failed/" + in.FailureCode, "level": "Error",
				"displayStatus": "Provisioning failed", "message": allocationMessage(in.FailureCode), "time": now}
		}
		if in.Power != "" {
			statuses = append(statuses, map[string]string{"code": "PowerState/" + in.Power, "level": "Info", "displayStatus": "VM " + in.Power})
		}
		props["instanceView"] = map[string]any{
			"computerName": fmt.Sprintf("%s%06s", c.opts.ScaleSet, in.InstanceID),
			"osName":       "ubuntu", "osVersion": "24.04",
			"statuses": statuses,
		}
	}
	vm := map[string]any{
		"id": c.scaleSetID() + "/virtualMachines/" + in.InstanceID, "name": in.Name, "instanceId": in.InstanceID,
		"type": "Microsoft.Compute/virtualMachineScaleSets/virtualMachines", "location": c.opts.Location,
		"sku": map[string]string{"name": c.opts.VMSize, "tier": "Standard"}, "properties": props,
	}
	if c.opts.Spot {
		props["priority"] = "Spot"
	}
	return vm
}

func (c *Cloud) listVMs(w http.ResponseWriter, r *http.Request) {
	expand := r.URL.Query().Get("$expand") == "instanceView"
	vis := c.visibleLocked()
	start, end, next, err := c.page(r, len(vis))
	if err != nil {
		writeError(w, err)
		return
	}
	value := []map[string]any{}
	for _, in := range vis[start:end] {
		value = append(value, c.vmJSON(in, expand))
	}
	body := map[string]any{"value": value}
	if next != "" {
		body["nextLink"] = next
	}
	writeJSON(w, http.StatusOK, body)
}

// vmLocked finds a listed instance by its instance ID.
func (c *Cloud) vmLocked(w http.ResponseWriter, id string) (*Instance, bool) {
	in, ok := c.instances[id]
	if !ok || in.Gone || time.Now().Before(in.visibleAt) {
		writeError(w, errorf(http.StatusNotFound, "NotFound", "The entity was not found in this Azure location."))
		return nil, false
	}
	return in, true
}

func (c *Cloud) getVM(w http.ResponseWriter, r *http.Request, id string) {
	if in, ok := c.vmLocked(w, id); ok {
		writeJSON(w, http.StatusOK, c.vmJSON(in, r.URL.Query().Get("$expand") == "instanceView"))
	}
}

// bootDiagnostics returns SAS URIs of the instance's boot diagnostics
// blobs; the serial console log is served by serveSerialLog.
func (c *Cloud) bootDiagnostics(w http.ResponseWriter, r *http.Request, id string) {
	in, ok := c.vmLocked(w, id)
	if !ok {
		return
	}
	base := c.srv.URL + "/bootdiagnostics/" + in.Name
	sas := "?sv=2022-11-02&sr=b&sp=r&se=" + time.Now().Add(2*time.Minute).UTC().Format("2006-01-02T15:04:05Z") + "&sig=" + c.sas
	writeJSON(w, http.StatusOK, map[string]string{
		"consoleScreenshotBlobUri": base + "/screenshot.bmp" + sas,
		"serialConsoleLogBlobUri":  base + "/serialconsole.log" + sas,
	})
}

// serveSerialLog serves an instance's serial console log, as Azure
// Storage serves a blob to a SAS URI: the host key blocks cloud-init
// prints at the end of the first boot, once the boot got that far.
func (c *Cloud) serveSerialLog(w http.ResponseWriter, r *http.Request, name string) {
	if r.URL.Query().Get("sig") != c.sas {
		w.Header().Set("x-ms-error-code", "AuthenticationFailed")
		http.Error(w, "Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.", http.StatusForbidden)
		return
	}
	in, ok := c.Instance(name)
	if !ok {
		w.Header().Set("x-ms-error-code", "BlobNotFound")
		http.Error(w, "The specified blob does not exist.", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	fmt.Fprintf(w, "[    0.000000] Linux version 6.8.0-1017-azure\n[  OK  ] Reached target Cloud-init target.\n")
	if in.Provisioning == ProvisioningCreating || in.FailureCode != "" {
		return
	}
	fp := fingerprint(in.HostKey)
	fmt.Fprintf(w, "ci-info: no authorized SSH keys fingerprints found for user %s.\n", c.opts.AdminUsername)
	fmt.Fprintf(w, "<14>Dec  4 12:00:00 cloud-init: #############################################################\n")
	fmt.Fprintf(w, "<14>Dec  4 12:00:00 cloud-init: -----BEGIN SSH HOST KEY FINGERPRINTS-----\n")
	fmt.Fprintf(w, "<14>Dec  4 12:00:00 cloud-init: 256 %s root@%s (ED25519)\n", fp, in.Name)
	fmt.Fprintf(w, "<14>Dec  4 12:00:00 cloud-init: -----END SSH HOST KEY FINGERPRINTS-----\n")
	fmt.Fprintf(w, "-----BEGIN SSH HOST KEY KEYS-----\n%s root@%s\n-----END SSH HOST KEY KEYS-----\n", in.HostKey, in.Name)
}

// listNICs lists an instance's network interface with its private address.
func (c *Cloud) listNICs(w http.ResponseWriter, id string) {
	in, ok := c.vmLocked(w, id)
	if !ok {
		return
	}
	nicID := c.scaleSetID() + "/virtualMachines/" + in.InstanceID + "/networkInterfaces/" + c.opts.ScaleSet + "-nic"
	writeJSON(w, http.StatusOK, map[string]any{"value": []map[string]any{{
		"name": c.opts.ScaleSet + "-nic", "id": nicID,
		"properties": map[string]any{
			"primary": true, "provisioningState": "Succeeded",
			"ipConfigurations": []map[string]any{{
				"name": c.opts.ScaleSet + "-ipconfig", "id": nicID + "/ipConfigurations/" + c.opts.ScaleSet + "-ipconfig",
				"properties": map[string]any{"primary": true, "privateIPAddress": in.PrivateIP, "privateIPAllocationMethod": "Dynamic", "privateIPAddressVersion": "IPv4"},
			}},
		},
	}}})
}

// listPublicIPs lists the set's instance-level public addresses, each
// naming the IP configuration (and so the instance) it belongs to.
func (c *Cloud) listPublicIPs(w http.ResponseWriter) {
	value := []map[string]any{}
	for _, in := range c.visibleLocked() {
		if in.Power != PowerRunning && in.Power != PowerStarting {
			continue // deallocation releases dynamic public addresses
		}
		nicID := c.scaleSetID() + "/virtualMachines/" + in.InstanceID + "/networkInterfaces/" + c.opts.ScaleSet + "-nic"
		value = append(value, map[string]any{
			"name": "pub", "id": nicID + "/ipConfigurations/" + c.opts.ScaleSet + "-ipconfig/publicIPAddresses/pub",
			"properties": map[string]any{"ipAddress": in.PublicIP, "publicIPAddressVersion": "IPv4", "publicIPAllocationMethod": "Dynamic",
				"ipConfiguration": map[string]string{"id": nicID + "/ipConfigurations/" + c.opts.ScaleSet + "-ipconfig"}},
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"value": value})
}
