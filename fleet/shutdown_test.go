package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider/sim"
)

// delete_instances_on_shutdown used to leak one instance per graceful stop:
// the next tick refilled the idle pool that DeleteIdle had just emptied.
func TestDeleteIdleOnShutdownLeavesNoInstance(t *testing.T) {
	f, group := newFleet(t, onDemand(1), sim.Config{}, nil)
	waitUntil(t, "the idle pool to hold a ready instance", func() bool { return f.Counts().InstancesByPhase["ready"] == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.DeleteIdle(ctx)
	// berth keeps running its loops for a moment after the deletions (it
	// flushes state, stops the HTTP server): give the core several ticks and
	// listings to change its mind.
	time.Sleep(300 * time.Millisecond)
	if st := group.Stats(); st.Requested != 1 || group.Live() != 0 {
		t.Fatalf("after the shutdown deletions: %d instances requested in all (want 1), %d still live (want 0)", st.Requested, group.Live())
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
