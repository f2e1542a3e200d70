package gcpfake

import (
	"bytes"
	"net/url"
	"path/filepath"
	"testing"
	"time"
)

// A project kept in a state file comes back after a restart as it was:
// the same endpoint, group sizes, instances (IDs, host keys, disks), an
// operation still pollable, and the access tokens it issued still valid.
func TestStateSurvivesARestart(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	opts := Options{Clock: clk.now, OperationTime: 10 * time.Second, BootTime: time.Second, Dir: dir, State: filepath.Join(dir, "state.json")}
	cloud, base := newCloud(t, opts)
	call(t, "POST", base+"instanceGroupManagers/berth-ci/resize?size=2&requestId=r1", "test-token", "")
	clk.add(2 * time.Second)
	mis := listed(t, base)
	if len(mis) != 2 {
		t.Fatalf("%d members before the restart, want 2", len(mis))
	}
	name := mis[0]["name"].(string)
	_, suspend := call(t, "POST", base+"instanceGroupManagers/berth-ci/suspendInstances?requestId=r2", "test-token",
		`{"instances":["zones/europe-west1-b/instances/`+name+`"]}`)
	before, _ := cloud.Instance(name)
	sa := cloud.ServiceAccountKey()
	url1 := cloud.URL()
	cloud.Close()

	again, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if again.URL() != url1 || !bytes.Equal(again.ServiceAccountKey(), sa) {
		t.Errorf("after the restart: endpoint %s, key file changed %v; want %s and the same key", again.URL(), !bytes.Equal(again.ServiceAccountKey(), sa), url1)
	}
	_, op := call(t, "GET", base+"operations/"+url.PathEscape(suspend["name"].(string)), "test-token", "")
	if op["err"] != nil || op["status"] != "RUNNING" {
		t.Errorf("the suspend's operation after the restart: %v; want it RUNNING, with the token issued before", op)
	}
	clk.add(10 * time.Second)
	after, _ := again.Instance(name)
	if after.ID != before.ID || after.HostKey != before.HostKey || after.Status != StatusSuspended {
		t.Errorf("instance after the restart: %+v; want ID %d, the same host key, SUSPENDED", after, before.ID)
	}
	if g := again.Group(); g.TargetSize != 1 || g.TargetSuspendedSize != 1 || g.Live != 2 {
		t.Errorf("group after the restart: %+v; want 1 running, 1 suspended", g)
	}
	if _, v := call(t, "POST", base+"instanceGroupManagers/berth-ci/resize?size=5&requestId=r1", "test-token", ""); v["err"] != nil {
		t.Fatal(v["err"])
	}
	if g := again.Group(); g.TargetSize != 1 {
		t.Errorf("a resize retried with its requestId after the restart was applied again: %+v", g)
	}
}

// Finished operations, and the requestIds that made them, are pruned once
// older than the hour the API guarantees for requestIds, so the state file
// of a long-lived fake does not grow without bound; a recent one is kept.
func TestFinishedOperationsArePruned(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	opts := Options{Clock: clk.now, OperationTime: time.Second, BootTime: time.Second, Dir: dir, State: filepath.Join(dir, "state.json")}
	cloud, base := newCloud(t, opts)
	_, first := call(t, "POST", base+"instanceGroupManagers/berth-ci/resize?size=1&requestId=r1", "test-token", "")
	clk.add(operationRetention + time.Minute)
	_, second := call(t, "POST", base+"instanceGroupManagers/berth-ci/resize?size=2&requestId=r2", "test-token", "")
	if _, op := call(t, "GET", base+"operations/"+url.PathEscape(first["name"].(string)), "test-token", ""); op["err"] == nil {
		t.Errorf("the operation finished over %s ago is still served: %v", operationRetention, op)
	}
	if _, op := call(t, "GET", base+"operations/"+url.PathEscape(second["name"].(string)), "test-token", ""); op["err"] != nil {
		t.Errorf("the recent operation: %v", op["err"])
	}
	cloud.mu.Lock()
	ops, reqs := len(cloud.ops), len(cloud.requests)
	cloud.mu.Unlock()
	if ops != 1 || reqs != 1 {
		t.Errorf("%d operations and %d requestIds kept; want the recent one of each", ops, reqs)
	}
	if second["id"] == first["id"] {
		t.Errorf("the new operation reuses the pruned one's id %v", first["id"])
	}
}
