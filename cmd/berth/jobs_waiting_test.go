package main

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// `berth jobs ID` and `berth jobs` say why a queued job waits.
func TestJobsSayWhyAQueuedJobWaits(t *testing.T) {
	now := time.Now()
	j := api.Job{ID: "7", State: api.JobQueued, Script: "make", CreatedAt: now.Add(-time.Minute),
		WaitingFor: api.WaitMaxInstances, WaitingDetail: "every slot is in use and the fleet is at max_instances"}
	var detail, table strings.Builder
	if err := printJobDetail(&detail, j, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(detail.String(), "Waiting for:  max_instances: every slot is in use") {
		t.Errorf("detail lacks the wait:\n%s", detail.String())
	}
	if err := printJobTable(&table, []api.Job{j}, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "waiting for max_instances") {
		t.Errorf("table lacks the wait:\n%s", table.String())
	}
}
