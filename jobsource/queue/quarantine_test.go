package queue_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/jobsource/queue"
)

// A job set aside as damaged keeps its last good copy through later
// backups, is listed, and restore puts it back queued.
func TestQuarantinedJobIsRestoredFromItsKeptCopy(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, dir)
	if _, err := q.Submit(api.JobRequest{Script: "echo first"}); err != nil {
		t.Fatal(err)
	}
	j, err := q.Submit(api.JobRequest{Script: "true", Env: map[string]string{"WORD_DAMAGED": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	path := filepath.Join(dir, "queue.db")
	data, _ := os.ReadFile(path)
	bad := strings.ReplaceAll(string(data), `["WORD_DAMAGED"]`, `["XORD_DAMAGED"]`)
	if bad == string(data) {
		t.Fatal("the record's env names are not in queue.db as JSON")
	}
	os.WriteFile(path, []byte(bad), 0o600)
	q2 := openQueue(t, dir)
	list, err := q2.Quarantined()
	if err != nil || len(list) != 1 || list[0].ID != j.ID || list[0].Kept == "" {
		t.Fatalf("Quarantined = %+v, %v", list, err)
	}
	if err := q2.Backup(); err != nil {
		t.Fatal(err)
	}
	q2.Close()
	state, err := queue.RestoreQuarantined(dir, j.ID)
	if err != nil || state != api.JobQueued {
		t.Fatalf("RestoreQuarantined = %s, %v", state, err)
	}
	if list, err := queue.ReadQuarantined(dir); err != nil || len(list) != 0 {
		t.Fatalf("after restore: quarantined %+v, %v", list, err)
	}
	q3 := openQueue(t, dir)
	if got, err := q3.Get(j.ID); err != nil || got.State != api.JobQueued {
		t.Fatalf("the restored job: %+v, %v", got, err)
	}
}

// Files left by a berth killed in the middle of a write are removed at
// open; the queue's own files stay.
func TestOpenSweepsInterruptedWrites(t *testing.T) {
	dir := t.TempDir()
	q := openQueue(t, dir)
	q.Close()
	left := []string{
		filepath.Join(dir, "queue.db.good-20260101T000000Z.tmp"),
		filepath.Join(dir, "last-id.tmp"),
		filepath.Join(dir, "logs", ".health-probe-123"),
	}
	for _, p := range left {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	openQueue(t, dir)
	for _, p := range left {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived the open", filepath.Base(p))
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "queue.db")); err != nil {
		t.Errorf("queue.db: %v", err)
	}
}
