package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/api"
)

// Issue 32, item 3, on the real binary: a damaged job record is set
// aside, and the clean stop then replaced queue.db.bak, the only good
// copy: `berth state check` said ok, restore had nothing to do, the job
// was gone. Now the good copy is kept beside queue.db, `berth jobs
// quarantined` and `berth state check` name the job, and `berth state
// restore-job` puts it back.
func TestQuarantinedJobKeepsItsLastGoodCopy(t *testing.T) {
	d := newDaemon(t, "")
	for _, word := range []string{"first", "damaged", "third"} {
		if out, errOut, code := d.berth("submit", "--wait", "--env", "WORD_"+strings.ToUpper(word)+"=1", "--", "echo "+word); code != 0 {
			t.Fatalf("submit: %d %s %s", code, out, errOut)
		}
	}
	ids := []string{}
	for _, j := range d.jobsList() {
		ids = append(ids, j.ID)
	}
	d.stop()
	queueDB := filepath.Join(d.dir, "state", "queue", "queue.db")
	data, _ := os.ReadFile(queueDB)
	damaged := strings.ReplaceAll(string(data), `["WORD_DAMAGED"]`, `["XORD_DAMAGED"]`)
	if damaged == string(data) || len(ids) != 3 {
		t.Fatalf("queue.db does not hold the job's env name as JSON (jobs %v)", ids)
	}
	if err := os.WriteFile(queueDB, []byte(damaged), 0o600); err != nil {
		t.Fatal(err)
	}
	d.start()
	out, errOut, code := d.berth("jobs", "quarantined")
	if code != 0 || !strings.Contains(out, ids[1]) || !strings.Contains(out, "queue.db.good-") {
		t.Errorf("berth jobs quarantined: exit %d\n%s%s", code, out, errOut)
	}
	d.stop() // a clean stop writes queue.db.bak without the job

	stateDir := filepath.Join(d.dir, "state")
	out, errOut, code = d.berth("state", "check", "--state-dir", stateDir)
	if code == 0 || !strings.Contains(out, "QUARANTINED job "+ids[1]) {
		t.Errorf("berth state check after the clean stop: exit %d, want it to report job %s quarantined\n%s%s", code, ids[1], out, errOut)
	}
	restored, errOut, code := d.berth("state", "restore-job", "--state-dir", stateDir, ids[1])
	if code != 0 {
		t.Fatalf("berth state restore-job %s: exit %d\n%s%s", ids[1], code, restored, errOut)
	}
	if out, _, code := d.berth("state", "check", "--state-dir", stateDir); code != 0 {
		t.Errorf("berth state check after restore-job (which said %q): exit %d\n%s", restored, code, out)
	}
	d.start()
	if j := d.job(ids[1]); j.State != api.JobSuccess {
		t.Errorf("the restored job: %s %q, want success as it ended", j.State, j.Reason)
	}
	if out, _, _ := d.berth("logs", ids[1]); !strings.Contains(out, "damaged") {
		t.Errorf("the restored job's log: %q", out)
	}
	if n := len(d.jobsList()); n != 3 {
		t.Errorf("%d jobs listed after restore-job, want 3", n)
	}
}
