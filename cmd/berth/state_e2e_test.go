package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// runRefused runs `berth run` and expects it to refuse to start.
func (d *daemon) runRefused() string {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, berthBin, "run", "--config", filepath.Join(d.dir, "berth.toml")).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		d.t.Fatalf("berth run on damaged state: %v, want exit 1 with an error:\n%s", err, out)
	}
	return string(out)
}

// Issue 9, item 2, on the real binary: a truncated state.db (SIGBUS before)
// and an emptied queue.db (silently started empty before) are refused with
// their names and what to do; `berth state check` lists them; `berth state
// restore` brings back the last good copies, and the parked environment
// resumes.
func TestDamagedStateFilesAreRefusedAndRestored(t *testing.T) {
	d := newDaemon(t, "")
	key, host := parkMarker(t, d)
	d.stop() // a clean stop writes the last good copies
	state := filepath.Join(d.dir, "state")
	stateDB, queueDB := filepath.Join(state, "state.db"), filepath.Join(state, "queue", "queue.db")
	if err := os.Truncate(stateDB, 10000); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(queueDB, 0); err != nil {
		t.Fatal(err)
	}

	out := d.runRefused()
	for _, want := range []string{stateDB, "is truncated", "has not written to it", "berth state restore --state-dir " + state} {
		if !strings.Contains(out, want) {
			t.Errorf("berth run output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "SIGBUS") || strings.Contains(out, "panic") {
		t.Fatalf("berth crashed instead of refusing:\n%s", out)
	}
	if fi, _ := os.Stat(stateDB); fi.Size() != 10000 {
		t.Fatalf("state.db is %d bytes after the refused start: it was written to", fi.Size())
	}

	out, _, code := d.berth("state", "check", "--state-dir", state)
	if code == 0 || !strings.Contains(out, "DAMAGED  "+stateDB) || !strings.Contains(out, "DAMAGED  "+queueDB+": is empty") ||
		!strings.Contains(out, "ok       "+stateDB+".bak") {
		t.Fatalf("berth state check: exit %d\n%s", code, out)
	}
	out, errOut, code := d.berth("state", "restore", "--state-dir", state)
	if code != 0 || strings.Count(out, "restored  ") != 2 {
		t.Fatalf("berth state restore: exit %d\n%s%s", code, out, errOut)
	}
	if _, _, code := d.berth("state", "check", "--state-dir", state); code != 0 {
		t.Fatal("state check still fails after the restore")
	}

	d.start()
	resumeMarker(t, d, key, host)
}

// Issue 19, failure 2, on the real binary: one changed byte inside the
// parked environment's record. berth refuses to start without writing
// state.db or replacing state.db.bak; `berth state check` names the bucket
// and key; `berth state restore` puts the last good copy back and the
// environment resumes.
func TestDamagedParkedRecordIsFoundAndRestored(t *testing.T) {
	d := newDaemon(t, "")
	key, host := parkMarker(t, d)
	d.stop()
	state := filepath.Join(d.dir, "state")
	stateDB := filepath.Join(state, "state.db")
	data, _ := os.ReadFile(stateDB)
	// The key's last character, in every copy of the record (bbolt leaves
	// older ones in free pages).
	bad := key[:len(key)-1] + string(key[len(key)-1]^1)
	damaged := []byte(strings.ReplaceAll(string(data), `"key":"`+key+`"`, `"key":"`+bad+`"`))
	if string(damaged) == string(data) {
		t.Fatalf("state.db does not hold environment %s as JSON", key)
	}
	data = damaged
	if err := os.WriteFile(stateDB, data, 0o600); err != nil {
		t.Fatal(err)
	}
	bak, _ := os.ReadFile(stateDB + ".bak")

	out := d.runRefused()
	if !strings.Contains(out, "record environments/") || !strings.Contains(out, "berth state restore") {
		t.Errorf("berth run output does not name the damaged record:\n%s", out)
	}
	if after, _ := os.ReadFile(stateDB); string(after) != string(data) {
		t.Error("the refused state.db was written to")
	}
	if after, _ := os.ReadFile(stateDB + ".bak"); string(after) != string(bak) {
		t.Fatal("state.db.bak was replaced by the refused start")
	}
	out, _, code := d.berth("state", "check", "--state-dir", state)
	if code == 0 || !strings.Contains(out, "bucket environments, key "+key) {
		t.Fatalf("berth state check: exit %d\n%s", code, out)
	}
	out, errOut, code := d.berth("state", "restore", "--state-dir", state)
	if code != 0 || !strings.Contains(out, "restored  "+stateDB) {
		t.Fatalf("berth state restore: exit %d\n%s%s", code, out, errOut)
	}
	d.start()
	resumeMarker(t, d, key, host)
}

// Issue 19, failure 2, queue.db on the real binary: one changed byte in one
// job's record. berth starts, sets that job aside with the reason, lists
// the others, and the job loop runs new jobs (it was wedged on the record).
func TestDamagedJobRecordIsQuarantinedByTheDaemon(t *testing.T) {
	d := newDaemon(t, "")
	var ids []string
	for _, word := range []string{"first", "damaged", "third"} {
		out, errOut, code := d.berth("submit", "--wait", "--env", "WORD_"+strings.ToUpper(word)+"=1", "--", "echo "+word)
		if code != 0 {
			t.Fatalf("submit: %d %s %s", code, out, errOut)
		}
	}
	for _, j := range d.jobsList() {
		ids = append(ids, j.ID)
	}
	d.stop()
	queueDB := filepath.Join(d.dir, "state", "queue", "queue.db")
	data, _ := os.ReadFile(queueDB)
	// Every copy of the record: bbolt leaves older ones in free pages.
	damaged := strings.ReplaceAll(string(data), `["WORD_DAMAGED"]`, `["XORD_DAMAGED"]`)
	if damaged == string(data) || len(ids) != 3 {
		t.Fatalf("queue.db does not hold the job's env name as JSON (jobs %v)", ids)
	}
	if err := os.WriteFile(queueDB, []byte(damaged), 0o600); err != nil {
		t.Fatal(err)
	}
	d.start()
	if !strings.Contains(d.log.String(), "quarantined") {
		t.Errorf("berth's log does not tell of the quarantined job")
	}
	if list := d.jobsList(); len(list) != 2 || list[0].ID != ids[0] || list[1].ID != ids[2] {
		t.Fatalf("GET /api/v1/jobs after the damage: %+v, want jobs %s and %s", list, ids[0], ids[2])
	}
	if _, errOut, code := d.berth("jobs", ids[1]); code == 0 || !strings.Contains(errOut, "quarantined") {
		t.Errorf("berth jobs %s: exit %d, %s; want it reported quarantined", ids[1], code, errOut)
	}
	if out, errOut, code := d.berth("submit", "--wait", "--", "echo after"); code != 0 || out != "after\n" {
		t.Fatalf("a job after the damage: exit %d, %q %s", code, out, errOut)
	}
}

// jobsList is GET /api/v1/jobs.
func (d *daemon) jobsList() []api.Job {
	d.t.Helper()
	list, err := d.client().Jobs(context.Background())
	if err != nil {
		d.t.Fatalf("GET /api/v1/jobs: %v", err)
	}
	return list
}
