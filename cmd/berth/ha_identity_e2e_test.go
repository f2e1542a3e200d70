package main

import (
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// healthBody is /healthz's status code and body.
func (d *daemon) healthBody() (int, string) {
	resp, err := healthClient.Get("http://" + d.listen + "/healthz")
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// startAnswering starts berth and waits until /healthz answers at all
// (start waits for 200).
func (d *daemon) startAnswering() {
	d.t.Helper()
	d.spawn()
	waitFor(d.t, 30*time.Second, "berth to answer /healthz", func() bool {
		code, _ := d.healthBody()
		return code != 0
	})
}

// neverLeads fails the test if d says it leads during the next span.
func (d *daemon) neverLeads(span time.Duration) {
	d.t.Helper()
	for end := time.Now().Add(span); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if d.haHealth().Role == "leader" {
			d.t.Fatalf("the manager leads a fleet whose state etcd lost (issue 32): %s", lastLines(d.log.String(), 5))
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Issue 32, item 1, on the real binary: etcd restarted with its data
// wiped while a manager leads. The manager must not lead the empty etcd
// as if it were a new fleet (before: within a second, instances=0, job IDs
// from 1 again): /healthz says what happened and what to do, the log
// too, also after a restart of the manager. `berth state new-fleet` is the
// explicit way on; the new fleet's job IDs go on above the old ones.
func TestHAEtcdWipedIsNotANewFleet(t *testing.T) {
	f := newHAFleet(t, 1, haAutoscaler)
	a := f.manager()
	a.waitRole(30*time.Second, "leader")
	var last int
	for range 3 {
		id := a.submit("--", "echo before the wipe")
		a.waitJobs(time.Minute, id)
		last, _ = strconv.Atoi(id)
	}

	if err := f.etcd.WipeMember(0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "/healthz to say that etcd lost the fleet", func() bool {
		code, body := a.healthBody()
		return code == 503 && strings.Contains(body, "etcd no longer holds this fleet") && strings.Contains(body, "new-fleet")
	})
	a.neverLeads(3 * haLease)
	if !strings.Contains(a.log.String(), "refusing to lead") {
		t.Errorf("the log does not say that the manager refuses to lead")
	}

	// A restart does not make the emptied etcd a new fleet either.
	a.stop()
	a.startAnswering()
	waitFor(t, 30*time.Second, "/healthz after a restart to say that etcd lost the fleet", func() bool {
		_, body := a.healthBody()
		return strings.Contains(body, "etcd no longer holds this fleet")
	})
	a.neverLeads(3 * haLease)

	out, errOut, code := a.berth("state", "new-fleet", "--config", filepath.Join(a.dir, "berth.toml"))
	if code != 0 || !strings.Contains(out, "new fleet") {
		t.Fatalf("berth state new-fleet: exit %d\n%s%s", code, out, errOut)
	}
	a.stop()
	a.start()
	a.waitRole(30*time.Second, "leader")
	id := a.submitRetrying(time.Minute, "--", "echo in the new fleet")
	if n, _ := strconv.Atoi(id); n <= last {
		t.Errorf("the new fleet's first job has ID %s, at or below %d, an ID the old fleet issued", id, last)
	}
	if j := a.waitJobs(time.Minute, id)[0]; j.State != api.JobSuccess {
		t.Errorf("a job in the new fleet: %s %q", j.State, j.Reason)
	}
}
