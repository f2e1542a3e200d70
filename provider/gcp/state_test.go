package gcp

import (
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
)

func TestMapState(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		status, action string
		age            time.Duration
		want           provider.State
	}{
		{"", "CREATING", 0, provider.StateCreating},
		{"PROVISIONING", "CREATING", 0, provider.StateCreating},
		{"STAGING", "CREATING", 11 * time.Minute, provider.StateTimeout},
		{"RUNNING", "VERIFYING", 0, provider.StateCreating},
		{"RUNNING", "NONE", 0, provider.StateRunning},
		{"RUNNING", "NONE", time.Hour, provider.StateRunning},
		{"RUNNING", "SUSPENDING", 0, provider.StateSuspending},
		{"SUSPENDING", "NONE", 0, provider.StateSuspending},
		{"SUSPENDED", "NONE", 0, provider.StateSuspended},
		{"SUSPENDED", "RESUMING", 0, provider.StateResuming},
		{"STAGING", "RESUMING", time.Hour, provider.StateResuming},
		{"RUNNING", "DELETING", 0, provider.StateDeleting},
		{"SUSPENDED", "DELETING", 0, provider.StateDeleting},
		{"RUNNING", "ABANDONING", 0, provider.StateDeleting},
		{"TERMINATED", "NONE", 0, provider.StateDeleting}, // a reclaimed Spot VM
		{"STOPPED", "NONE", 0, provider.StateDeleting},
		{"TERMINATED", "RECREATING", 0, provider.StateDeleting}, // the old VM of a recreation
	} {
		if got := mapState(c.status, c.action, t0, t0.Add(c.age), 10*time.Minute); got != c.want {
			t.Errorf("mapState(%s, %s, age %v) = %s, want %s", c.status, c.action, c.age, got, c.want)
		}
	}
}
