package gcpfake

import (
	"net/url"
	"testing"
	"time"

	"google.golang.org/api/googleapi"
)

// listed returns listManagedInstances' entries.
func listed(t *testing.T, base string) []map[string]any {
	t.Helper()
	_, v := call(t, "POST", base+"instanceGroupManagers/berth-ci/listManagedInstances", "test-token", "")
	var out []map[string]any
	items, _ := v["managedInstances"].([]any)
	for _, it := range items {
		out = append(out, it.(map[string]any))
	}
	return out
}

func lastAttemptCode(mi map[string]any) string {
	la, _ := mi["lastAttempt"].(map[string]any)
	outer, _ := la["errors"].(map[string]any)
	errs, _ := outer["errors"].([]any)
	if len(errs) == 0 {
		return ""
	}
	code, _ := errs[0].(map[string]any)["code"].(string)
	return code
}

// During a stockout a resize ends DONE with no error, and the members the
// group cannot create are listed CREATING with a name but no id and no
// status, the error in lastAttempt; instances.get does not find them.
// Resizing down drops them first; when the stockout ends the group
// creates the rest.
func TestStockoutListsMembersWithoutID(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)}
	cloud, base := newCloud(t, Options{Clock: clk.now, OperationTime: time.Second, BootTime: 5 * time.Second})
	cloud.Stockout(CodeQuota)
	_, op := call(t, "POST", base+"instanceGroupManagers/berth-ci/resize?size=3&requestId=r1", "test-token", "")
	clk.add(time.Second)
	_, done := call(t, "GET", base+"operations/"+url.PathEscape(op["name"].(string)), "test-token", "")
	if done["status"] != "DONE" || done["error"] != nil {
		t.Fatalf("resize during a stockout: %v; want DONE without error", done)
	}
	mis := listed(t, base)
	if len(mis) != 3 {
		t.Fatalf("%d members listed, want 3: %v", len(mis), mis)
	}
	for _, mi := range mis {
		if mi["id"] != nil || mi["instanceStatus"] != nil || mi["name"] == nil || mi["currentAction"] != ActionCreating || lastAttemptCode(mi) != CodeQuota {
			t.Errorf("member during a stockout: %v; want a name, CREATING, no id or status, lastAttempt %s", mi, CodeQuota)
		}
	}
	name := mis[0]["name"].(string)
	if _, v := call(t, "GET", base+"instances/"+name, "test-token", ""); v["err"] == nil || v["err"].(*googleapi.Error).Code != 404 {
		t.Errorf("instances.get of a member not created: %v; want 404", v["err"])
	}
	if g := cloud.Group(); g.TargetSize != 3 || g.Failing != 3 || g.Live != 0 || g.Peak != 0 {
		t.Errorf("group %+v; want target 3, 3 failing, none live", g)
	}

	call(t, "POST", base+"instanceGroupManagers/berth-ci/resize?size=1&requestId=r2", "test-token", "")
	if g := cloud.Group(); g.TargetSize != 1 || g.Failing != 1 {
		t.Errorf("group %+v after resize to 1; want the failing members dropped, 1 left", g)
	}
	cloud.Stockout(CodeStockout)
	if mis := listed(t, base); len(mis) != 1 || lastAttemptCode(mis[0]) != CodeStockout {
		t.Errorf("after the code changed: %v; want one member failing with %s", mis, CodeStockout)
	}
	cloud.Stockout("")
	mis = listed(t, base)
	if len(mis) != 1 || mis[0]["id"] == nil || mis[0]["instanceStatus"] != StatusProvisioning || mis[0]["lastAttempt"] != nil {
		t.Errorf("after the stockout: %v; want one member created, PROVISIONING with an id", mis)
	}
}

// A new instance is listed before it exists, with no id (CreationLag);
// its guest agent publishes the host keys only once it has booted.
func TestCreationLagAndHostKeysAfterBoot(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)}
	_, base := newCloud(t, Options{Clock: clk.now, CreationLag: 2 * time.Second, BootTime: 3 * time.Second, AgentDelay: time.Second})
	call(t, "POST", base+"instanceGroupManagers/berth-ci/resize?size=1&requestId=r1", "test-token", "")
	mis := listed(t, base)
	if len(mis) != 1 || mis[0]["id"] != nil || mis[0]["currentAction"] != ActionCreating {
		t.Fatalf("just after the resize: %v; want one member CREATING without id", mis)
	}
	name := mis[0]["name"].(string)
	clk.add(2 * time.Second)
	if mis = listed(t, base); mis[0]["id"] == nil {
		t.Fatalf("after CreationLag: %v; want an id", mis)
	}
	keys := func() error {
		_, v := call(t, "GET", base+"instances/"+name+"/getGuestAttributes?queryPath=hostkeys%2F", "test-token", "")
		err, _ := v["err"].(error)
		return err
	}
	if err := keys(); err == nil {
		t.Error("host keys published while the instance is still booting")
	}
	clk.add(3 * time.Second)
	listed(t, base) // the group notices the boot
	if err := keys(); err == nil {
		t.Error("host keys published before the guest agent ran")
	}
	clk.add(time.Second)
	if err := keys(); err != nil {
		t.Errorf("host keys after boot and AgentDelay: %v", err)
	}
}
