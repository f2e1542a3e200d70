package azurefake

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func setPath(c *Cloud) string {
	return "/subscriptions/" + c.Options().Subscription + "/resourceGroups/berth/providers/Microsoft.Compute/virtualMachineScaleSets/berth-ci"
}

// In a shortage the capacity operation fails AllocationFailed and the
// instances stay in the set, Failed, counted in sku.capacity; a vCPU quota
// refuses the PATCH itself with 409 OperationNotAllowed; a set is
// overprovisioned unless created otherwise.
func TestAllocationFailureKeepsFailedInstancesAndQuotaRefusesAtRequest(t *testing.T) {
	c, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tok := token(t, c)
	v := "?api-version=" + computeAPIVersion
	if _, _, body := call(t, c, http.MethodGet, setPath(c)+v, tok, ""); body["properties"].(map[string]any)["overprovision"] != true {
		t.Errorf("default set: overprovision %v, want true", body["properties"].(map[string]any)["overprovision"])
	}
	c.AllocationFailure("")
	status, h, _ := call(t, c, http.MethodPatch, setPath(c)+v, tok, `{"sku": {"capacity": 2}}`)
	if status != 200 {
		t.Fatalf("PATCH in a shortage: %d", status)
	}
	_, _, op := call(t, c, http.MethodGet, strings.TrimPrefix(h.Get("Azure-AsyncOperation"), c.URL()), tok, "")
	if op["status"] != "Failed" || op["error"].(map[string]any)["code"] != CodeAllocationFailed {
		t.Errorf("operation in a shortage: %v", op)
	}
	if c.Capacity() != 2 || len(c.Live()) != 2 {
		t.Errorf("capacity %d, %d instances; want the 2 failed ones kept and counted", c.Capacity(), len(c.Live()))
	}
	_, _, list := call(t, c, http.MethodGet, setPath(c)+"/virtualMachines"+v+"&$expand=instanceView", tok, "")
	for _, vm := range list["value"].([]any) {
		props := vm.(map[string]any)["properties"].(map[string]any)
		st := props["instanceView"].(map[string]any)["statuses"].([]any)
		if props["provisioningState"] != ProvisioningFailed || st[0].(map[string]any)["code"] != "ProvisioningState/failed/AllocationFailed" || len(st) != 1 {
			t.Errorf("failed instance listed as %v", props)
		}
	}
	c.AllocationFailure("-")
	c.SetCoreQuota(6)
	status, _, body := call(t, c, http.MethodPatch, setPath(c)+v, tok, `{"sku": {"capacity": 4}}`)
	msg, _ := body["error"].(map[string]any)["message"].(string)
	if status != http.StatusConflict || errorCode(body) != "OperationNotAllowed" || !strings.Contains(msg, "Current Limit: 6, Current Usage: 4, Additional Required: 4") {
		t.Errorf("PATCH over the quota: %d %v", status, body)
	}
	if c.Capacity() != 2 {
		t.Errorf("capacity %d after a refused PATCH, want 2", c.Capacity())
	}
}

// A call before the Retry-After of ThrottleFor elapsed is refused again
// with what is left, and counted as early.
func TestThrottleForRefusesEarlyCalls(t *testing.T) {
	c, err := New(Options{NoOverprovision: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tok := token(t, c)
	c.ThrottleFor("GetScaleSet", 90*time.Second)
	status, h, _ := call(t, c, http.MethodGet, setPath(c)+"?api-version="+computeAPIVersion, tok, "")
	if status != 429 || h.Get("Retry-After") != "90" {
		t.Errorf("throttled for 90 s: %d Retry-After %q", status, h.Get("Retry-After"))
	}
	if status, _, _ := call(t, c, http.MethodGet, setPath(c)+"?api-version="+computeAPIVersion, tok, ""); status != 429 || c.Early("GetScaleSet") != 1 {
		t.Errorf("a call before the Retry-After: %d, early calls %d; want 429, 1", status, c.Early("GetScaleSet"))
	}
	c.ThrottleFor("GetScaleSet", 0)
	if status, _, body := call(t, c, http.MethodGet, setPath(c)+"?api-version="+computeAPIVersion, tok, ""); status != 200 || body["properties"].(map[string]any)["overprovision"] != false {
		t.Errorf("lifted: %d %v", status, body)
	}
}

// With a state file the subscription survives a restart: same address,
// same instances with the same host keys, the token still valid, the
// injected quota still there.
func TestStateFileKeepsTheSubscriptionAcrossARestart(t *testing.T) {
	dir := t.TempDir()
	opts := Options{StateFile: filepath.Join(dir, "state.json"), Dir: filepath.Join(dir, "disks"), AuthorizedKey: "x"}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	tok := token(t, c)
	if status, _, _ := call(t, c, http.MethodPatch, setPath(c)+"?api-version="+computeAPIVersion, tok, `{"sku": {"capacity": 2}}`); status != 200 {
		t.Fatalf("PATCH: %d", status)
	}
	c.SetCoreQuota(8)
	url, before := c.URL(), c.Live()
	in0, _ := c.Instance(before[0])
	c.Close()

	c, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.URL() != url || strings.Join(c.Live(), ",") != strings.Join(before, ",") || c.Capacity() != 2 {
		t.Fatalf("after a restart: %s %v capacity %d; want %s %v 2", c.URL(), c.Live(), c.Capacity(), url, before)
	}
	if in, _ := c.Instance(before[0]); in.HostKey != in0.HostKey || in.Power != PowerRunning {
		t.Errorf("instance after a restart: %+v, want host key %s, running", in, in0.HostKey)
	}
	status, _, body := call(t, c, http.MethodPatch, setPath(c)+"?api-version="+computeAPIVersion, tok, `{"sku": {"capacity": 5}}`)
	if status != http.StatusConflict || errorCode(body) != "OperationNotAllowed" {
		t.Errorf("the old token and the quota after a restart: %d %v", status, body)
	}
}

// Operations that ended over operationRetention ago are pruned when a new
// one starts, so a long-lived fake's state file does not grow without
// bound; the operation just started is served.
func TestFinishedOperationsArePruned(t *testing.T) {
	defer func(r time.Duration) { operationRetention = r }(operationRetention)
	operationRetention = 0 // any operation that ended is old enough
	dir := t.TempDir()
	c, err := New(Options{StateFile: filepath.Join(dir, "state.json"), Dir: filepath.Join(dir, "disks"), AuthorizedKey: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tok := token(t, c)
	var asyncs []string
	for _, n := range []string{"1", "2"} {
		status, h, _ := call(t, c, http.MethodPatch, setPath(c)+"?api-version="+computeAPIVersion, tok, `{"sku": {"capacity": `+n+`}}`)
		if status != 200 {
			t.Fatalf("PATCH: %d", status)
		}
		asyncs = append(asyncs, strings.TrimPrefix(h.Get("Azure-AsyncOperation"), c.URL()))
	}
	if status, _, _ := call(t, c, http.MethodGet, asyncs[0], tok, ""); status != http.StatusNotFound {
		t.Errorf("the first operation, ended before the second started: %d; want 404, pruned", status)
	}
	if status, _, _ := call(t, c, http.MethodGet, asyncs[1], tok, ""); status != 200 {
		t.Errorf("the operation just started: %d", status)
	}
	c.mu.Lock()
	n := len(c.ops)
	c.mu.Unlock()
	if n != 1 {
		t.Errorf("%d operations kept; want 1", n)
	}
}
