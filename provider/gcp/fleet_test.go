package gcp

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/fleet"
	"github.com/berth-ci/berth/internal/gcpfake"
	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
	"github.com/berth-ci/berth/store"
)

// runFleet starts berth's fleet (the daemon's core owner) over the GCP
// provider, with state in st; stop ends it as a process exit would.
func runFleet(t *testing.T, core *scaler.Scaler, g provider.InstanceGroup, st *store.Bolt) (f *fleet.Fleet, stop func()) {
	t.Helper()
	f = fleet.New(core, fleet.Options{Provider: g, Store: st, UpdateInterval: 50 * time.Millisecond,
		TickInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	return f, func() { cancel(); <-done }
}

// eventually polls cond until it holds, failing after a generous deadline;
// it asserts no timing, only that the state is reached.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fleetIDs(f *fleet.Fleet) []string {
	var ids []string
	for _, in := range f.Instances() {
		ids = append(ids, in.ID)
	}
	slices.Sort(ids)
	return ids
}

// groupIDs lists the IDs of the instances the fake group holds, not
// counting those being deleted.
func groupIDs(cloud *gcpfake.Cloud) []string {
	var ids []string
	for _, name := range cloud.Instances() {
		if in, ok := cloud.Instance(name); ok && !in.Gone && in.Action != gcpfake.ActionDeleting {
			ids = append(ids, strconv.FormatUint(in.ID, 10))
		}
	}
	slices.Sort(ids)
	return ids
}

// Berth's fleet over the fake managed instance group, under the chaos the
// AWS provider's fleet test meets: listing lag, rate refusals on every
// kind of call, and a restart with jobs running. Nothing leaks and the
// group never holds more than max_instances.
func TestFleetOverManagedInstanceGroup(t *testing.T) {
	cloud, key, sa := fakeGCP(t, gcpfake.Options{BootTime: 200 * time.Millisecond, ListingLag: 300 * time.Millisecond,
		StopTime: 100 * time.Millisecond, OperationTime: 50 * time.Millisecond})
	const max = 3
	cfg := scaler.Config{MaxInstances: max, Policies: scaler.FixedPolicy(policy.Policy{IdleCount: 1})}
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g1, _ := newGroup(t, cloud, key, sa, nil)
	g1.retryWait = 10 * time.Millisecond
	// Rate refusals throughout: every fifth call for a while.
	for _, m := range []string{"instanceGroupManagers.listManagedInstances", "instanceGroupManagers.resize", "instances.get", "zoneOperations.get"} {
		cloud.Throttle(m, 2, http.StatusTooManyRequests)
	}
	cloud.Throttle("", 3, http.StatusForbidden)
	f1, stop1 := runFleet(t, scaler.New(cfg, time.Now()), g1, st)

	// The idle pool: one instance. The listing lag must not make berth
	// ask twice.
	eventually(t, "an idle instance", func() bool { return f1.Counts().Slots["idle"] == 1 })
	if s := cloud.Group(); s.TargetSize != 1 {
		t.Fatalf("target size %d for an idle pool of 1, want 1", s.TargetSize)
	}

	// Booking: the job gets the idle instance, and berth reaches it over
	// SSH with the host key from the guest attributes.
	if err := f1.Reserve("job-1"); err != nil {
		t.Fatal(err)
	}
	acq, err := f1.Acquire(context.Background(), "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if acq.Connect.HostKey == "" {
		t.Error("no host key for the job's instance")
	}
	out, err := executor.Output(context.Background(), acq.Connect, "echo job-1 ran", time.Minute)
	if err != nil || string(out) != "job-1 ran\n" {
		t.Fatalf("job on %s through berth's executor: %q, %v", acq.Instance, out, err)
	}

	// Scaling: more jobs than max_instances fill the group to max and
	// no further.
	cloud.Throttle("", 4, http.StatusTooManyRequests)
	for _, k := range []string{"job-2", "job-3"} {
		if err := f1.Reserve(k); err != nil {
			t.Fatalf("Reserve(%s): %v", k, err)
		}
		if _, err := f1.Acquire(context.Background(), k); err != nil {
			t.Fatalf("Acquire(%s): %v", k, err)
		}
	}
	f1.Reserve("job-4") // waits: the group is full
	time.Sleep(500 * time.Millisecond)
	if s := cloud.Group(); s.TargetSize != max || s.Live != max {
		t.Fatalf("group %+v with 4 jobs and max_instances %d, want %d", s, max, max)
	}
	before := fleetIDs(f1)

	// Restart: berth stops with jobs running (they die with it) and comes
	// back from its state file with a fresh provider.
	stop1()
	saved, ok, err := st.Load()
	if err != nil || !ok {
		t.Fatalf("Load: %v, %v", ok, err)
	}
	core, _, err := scaler.Restore(cfg, saved, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := newGroup(t, cloud, key, sa, nil)
	g2.retryWait = 10 * time.Millisecond
	cloud.Throttle("", 3, http.StatusTooManyRequests)
	f2, stop2 := runFleet(t, core, g2, st)
	defer stop2()

	// Reconciliation and scale-in: the dead jobs' instances are adopted;
	// berth trims the group to the idle pool through deleteInstances, and
	// the group creates no replacements.
	eventually(t, "the group trimmed to the idle pool", func() bool {
		return len(groupIDs(cloud)) == 1 && f2.Counts().Slots["idle"] == 1
	})
	kept := groupIDs(cloud)
	if !slices.Contains(before, kept[0]) {
		t.Errorf("the instance kept, %s, is not one of those before the restart, %v", kept[0], before)
	}
	eventually(t, "berth to see the deleted instances gone", func() bool { return slices.Equal(fleetIDs(f2), kept) })
	if s := cloud.Group(); s.TargetSize != 1 || s.Peak > max {
		t.Errorf("group %+v after scale-in to 1; want target size 1 and never more than %d instances", s, max)
	}
	if n := len(cloud.Instances()); n != max {
		t.Errorf("%d instances created in all, want %d: the restart or the scale-in created more", n, max)
	}
}
