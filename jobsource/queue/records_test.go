package queue_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/boltfile"
	"github.com/berth-ci/berth/jobsource/queue"
)

// One changed byte in one job's record in a real queue.db (issue 19): the
// file's structure is sound, so berth starts, but that job is set aside
// (quarantined) with a reason, the other jobs are listed and run, the job
// loop is not wedged on the bad record, and queue.db.bak is not replaced.
func TestOneDamagedJobRecordIsQuarantinedAndHidesNothingElse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "queue")
	var logs bytes.Buffer
	quiet := queue.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	q, err := queue.Open(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, env := range []string{"FIRST", "DAMAGED", "THIRD"} {
		j, err := q.Submit(api.JobRequest{Script: "echo " + env, Env: map[string]string{env: "x"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "queue.db")
	data, _ := os.ReadFile(path)
	i := bytes.Index(data, []byte(`"env_names":["DAMAGED"]`))
	if i < 0 {
		t.Fatal("the job record is not in the file as JSON")
	}
	data[i+len(`"env_names":["`)] = 'X' // DAMAGED -> XAMAGED
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	bak, _ := os.ReadFile(path + boltfile.BackupSuffix)

	recs := boltfile.Records(boltfile.Check(path, queue.CheckRecord))
	if len(recs) != 1 || recs[0].Bucket != "jobs" || recs[0].Key != ids[1] {
		t.Fatalf("check names %v, want jobs/%s", recs, ids[1])
	}

	q, err = queue.Open(dir, quiet)
	if err != nil {
		t.Fatalf("open with one damaged job record: %v", err)
	}
	defer q.Close()
	if after, _ := os.ReadFile(path + boltfile.BackupSuffix); !bytes.Equal(bak, after) {
		t.Error("queue.db.bak was replaced although a record was quarantined")
	}
	if !strings.Contains(logs.String(), "quarantined") {
		t.Errorf("the log does not tell of the quarantine:\n%s", logs.String())
	}
	list, err := q.List("", 0)
	if err != nil || len(list) != 2 || list[0].ID != ids[0] || list[1].ID != ids[2] {
		t.Fatalf("list: %v %+v, want jobs %s and %s", err, list, ids[0], ids[2])
	}
	if _, err := q.Get(ids[1]); !errors.Is(err, queue.ErrNotFound) || !strings.Contains(err.Error(), "quarantined") || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("get the damaged job: %v, want not found, quarantined, with the reason", err)
	}
	for _, want := range []string{ids[0], ids[2]} {
		j, err := q.Request(context.Background())
		if err != nil || j == nil || j.ID() != want {
			t.Fatalf("request: %v %v, want job %s", j, err, want)
		}
	}
}
