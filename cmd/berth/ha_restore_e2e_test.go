package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource/queue"
)

// haOneInstance makes every job of a test run on the same instance.
const haOneInstance = `
[autoscaler]
max_instances = 1
[[autoscaler.policy]]
idle_count = 0
preemptive_mode = false
`

// Issue 43, item 1, on the real binary: etcd restored from a copy taken
// before a job was submitted, while that job still runs on the fleet's
// only instance. Before: the manager led on the restored state at once,
// took the instance for idle and booked new jobs beside the running one
// (in its files), and the job issued after the snapshot answered 404. Now
// the manager refuses to lead, says why and what to do, also after a
// restart; `berth state accept-restore` (refused while a manager runs)
// records the lost job failed with the restore's reason and makes the
// instance unknown, so the next job runs on a reset instance, with an ID
// above every one issued before.
func TestHASnapshotRestoreIsThePast(t *testing.T) {
	f := newHAFleet(t, 1, haOneInstance)
	a := f.manager()
	a.waitRole(30*time.Second, "leader")
	before := a.submit("--", "echo before the snapshot")
	a.waitJobs(time.Minute, before)

	snapshot, err := f.etcd.CopyMember(0)
	if err != nil {
		t.Fatal(err)
	}
	a.waitRole(time.Minute, "leader")
	after := a.submitRetrying(time.Minute, "--", "echo ran after the snapshot > /tmp/after-snapshot; sleep 600")
	waitFor(t, time.Minute, "the job submitted after the snapshot to run", func() bool { return a.job(after).State == api.JobRunning })

	if err := f.etcd.RollBackMember(0, snapshot); err != nil {
		t.Fatal(err)
	}
	pastSaid := func() bool {
		code, body := a.healthBody()
		return code == 503 && strings.Contains(body, "from the past") && strings.Contains(body, "accept-restore")
	}
	waitFor(t, 30*time.Second, "/healthz to say that etcd holds the fleet's past", pastSaid)
	// Which line depends on whether the manager's restored session
	// survives the rollback: it steps down within the term, or its next
	// campaign refuses to lead. Either way it must say why.
	waitFor(t, 30*time.Second, "the log to say that the manager refuses to lead on the past", func() bool {
		l := a.log.String()
		return strings.Contains(l, "refusing to lead: etcd holds the fleet's state from the past") ||
			strings.Contains(l, "etcd holds the fleet's state from the past (restored from a snapshot?): stepping down")
	})
	a.neverLeads(3 * haLease)

	// A restart knows it too: the highest job ID seen is on disk.
	a.kill9()
	a.startAnswering()
	waitFor(t, 30*time.Second, "/healthz after a restart to say that etcd holds the fleet's past", pastSaid)
	a.neverLeads(3 * haLease)

	cfg := filepath.Join(a.dir, "berth.toml")
	if out, errOut, code := a.berth("state", "accept-restore", "--config", cfg); code == 0 || !strings.Contains(errOut, "stop every one") {
		t.Fatalf("accept-restore while a manager runs: exit %d\n%s%s", code, out, errOut)
	}
	a.kill9()
	var out string
	waitFor(t, 30*time.Second, "accept-restore to run once the manager's candidacy expired", func() bool {
		var code int
		out, _, code = a.berth("state", "accept-restore", "--config", cfg)
		return code == 0
	})
	if !strings.Contains(out, "restore accepted") {
		t.Fatalf("accept-restore said: %s", out)
	}

	a.start()
	a.waitRole(30*time.Second, "leader")
	if j := a.job(after); j.State != api.JobFailed || j.Reason != queue.RestoreReason {
		t.Errorf("the job issued after the snapshot: %s %q, want failed with %q", j.State, j.Reason, queue.RestoreReason)
	}
	if j := a.job(before); j.State != api.JobSuccess {
		t.Errorf("the job that ended before the snapshot: %s %q", j.State, j.Reason)
	}
	probe := a.submitRetrying(time.Minute, "--", "if [ -e /tmp/after-snapshot ]; then echo the files of the job from after the snapshot are here; exit 3; fi")
	if j := a.waitJobs(2*time.Minute, probe)[0]; j.State != api.JobSuccess {
		t.Errorf("a job after the restore ran beside the job from after the snapshot: %s %q", j.State, j.Reason)
	}
	if p, _ := strconv.Atoi(probe); p <= mustAtoi(t, after) {
		t.Errorf("the first job after the restore has ID %s, not above %s, an ID issued before", probe, after)
	}
	f.noJobProcessLeft(time.Minute, "sleep 600")
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("job ID %q: %v", s, err)
	}
	return n
}
