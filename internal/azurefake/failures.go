package azurefake

import (
	"net/http"
	"time"
)

// Capacity and quota failures, and long throttling, as Azure reports them.
//
// An allocation failure does not fail a scale-out alone: the instances the
// set could not allocate stay in it, provisioningState Failed, their
// instance view's status "ProvisioningState/failed/<code>" at level Error
// with the error's message (armcompute VirtualMachineScaleSetVMProperties
// .ProvisioningState, InstanceViewStatus.Code/Level/Message), and they
// count in sku.capacity until deleted; the capacity operation ends Failed
// with the same code. A regional vCPU quota refuses the PATCH itself, at
// request time: 409 OperationNotAllowed ("Resolve errors for resource
// quotas", Azure Resource Manager troubleshooting docs: "Operation results
// in exceeding quota limits of Core. Maximum allowed: 4, Current in use: 4,
// Additional requested: 2."). Quota counts allocated and deallocated
// instances alike.

// Allocation failure codes Azure uses for a region or zone out of
// capacity for the VM size; AllocationFailed is the common one.
const (
	CodeAllocationFailed       = "AllocationFailed"
	CodeZonalAllocationFailed  = "ZonalAllocationFailed"
	allocationFailedMessage    = "Allocation failed. We do not have sufficient capacity for the requested VM size in this region. Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance"
	zonalAllocationFailMessage = "Allocation failed. We do not have sufficient capacity for the requested VM size in this zone. Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance"
)

// vCPUs of the VM sizes the fake knows; any other size counts 2.
var sizeCores = map[string]int{"Standard_B1s": 1, "Standard_D2s_v5": 2, "Standard_D4s_v5": 4, "Standard_D8s_v5": 8}

func (c *Cloud) coresPerInstance() int {
	if n, ok := sizeCores[c.opts.VMSize]; ok {
		return n
	}
	return 2
}

// AllocationFailure makes every instance the set launches from now on
// fail allocation with code (CodeAllocationFailed when ""), until
// AllocationFailure("-") ends the shortage. Instances already failed stay
// failed, as in Azure: they must be deleted (or reimaged).
func (c *Cloud) AllocationFailure(code string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch code {
	case "-":
		code = ""
	case "":
		code = CodeAllocationFailed
	}
	c.opts.AllocationFailure = code
	c.changedLocked()
}

// SetCoreQuota sets the region's vCPU quota for the set's VM family; 0
// means no limit. A scale-out beyond it is refused at request time.
func (c *Cloud) SetCoreQuota(cores int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opts.CoreQuota = cores
	c.changedLocked()
}

// ThrottleFor throttles every call of action (any call when "") for d:
// each one before then is refused with 429 and a Retry-After of what is
// left, as ARM refuses a request sent before the Retry-After it gave
// elapsed ("If you send a request before the retry value has elapsed,
// your request isn't processed and a new retry value is returned":
// "Troubleshooting API throttling errors", Azure Virtual Machines docs).
// d above 60 s is longer than azcore's retry policy waits
// (runtime/policy_retry.go: a Retry-After above MaxRetryDelay, 60 s by
// default, ends the retries and returns the 429). ThrottleFor(action, 0)
// lifts it.
func (c *Cloud) ThrottleFor(action string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.told, action)
	if d <= 0 {
		delete(c.throttledUntil, action)
		return
	}
	c.throttledUntil[action] = time.Now().Add(d)
}

// SetOverprovision turns the set's overprovisioning on or off, as
// `az vmss update --set overprovision=...` does.
func (c *Cloud) SetOverprovision(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opts.NoOverprovision = !on
}

// Early returns how many calls of action came while ThrottleFor had it
// throttled, after the first refusal: calls a client made before the
// Retry-After it was given.
func (c *Cloud) Early(action string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.early[action]
}

// throttledLocked refuses a call made during a ThrottleFor window.
func (c *Cloud) throttledLocked(w http.ResponseWriter, action string) bool {
	now := time.Now()
	for _, k := range []string{action, ""} {
		until, ok := c.throttledUntil[k]
		if !ok || !now.Before(until) {
			continue
		}
		if c.told[k] {
			c.early[action]++
		}
		c.told[k] = true
		retryAfter(w.Header(), until.Sub(now))
		writeError(w, errorf(http.StatusTooManyRequests, "TooManyRequests",
			"The request is being throttled as the limit has been reached for operation group '%s'. Please try again after '%d' seconds.", action, int(until.Sub(now).Seconds()+1)))
		return true
	}
	return false
}

// quotaLocked refuses a capacity of n when its vCPUs exceed the quota,
// with ARM's 409 OperationNotAllowed.
func (c *Cloud) quotaLocked(n int) *apiError {
	if c.opts.CoreQuota == 0 || n <= c.capacity {
		return nil
	}
	per := c.coresPerInstance()
	used, want := c.capacity*per, n*per
	if want <= c.opts.CoreQuota {
		return nil
	}
	return errorf(http.StatusConflict, "OperationNotAllowed",
		"Operation could not be completed as it results in exceeding approved Total Regional Cores quota. Additional details - Deployment Model: Resource Manager, Location: %s, Current Limit: %d, Current Usage: %d, Additional Required: %d, (Minimum) New Limit Required: %d. Submit a request for Quota increase at https://aka.ms/ProdCoreQuotaIncrease by specifying parameters listed in the 'Details' section for deployment to succeed.",
		c.opts.Location, c.opts.CoreQuota, used, want-used, want)
}

// allocationMessage is the message Azure gives with an allocation code.
func allocationMessage(code string) string {
	if code == CodeZonalAllocationFailed {
		return zonalAllocationFailMessage
	}
	return allocationFailedMessage
}

// failAllocationLocked leaves a new instance Failed with code: no power
// state (nothing was allocated), no SSH, counted in the capacity.
func (c *Cloud) failAllocationLocked(in *Instance, code string) {
	in.Provisioning, in.Power, in.FailureCode = ProvisioningFailed, "", code
	in.until = time.Time{}
}

// isAllocationCode reports whether code is one Azure gives for a lack of
// capacity, which leaves the instances it could not allocate failed.
func isAllocationCode(code string) bool {
	return code == CodeAllocationFailed || code == CodeZonalAllocationFailed
}
