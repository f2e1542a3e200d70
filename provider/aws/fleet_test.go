package aws

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/fleet"
	"github.com/berth-ci/berth/internal/awsfake"
	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
	"github.com/berth-ci/berth/store"
)

// runFleet starts berth's fleet (the daemon's core owner) over the AWS
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

// groupIDs lists the instances the fake group holds in any lifecycle state.
func groupIDs(cloud *awsfake.Cloud) []string {
	var ids []string
	for _, id := range cloud.Instances() {
		if in, _ := cloud.Instance(id); in.Lifecycle != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Berth's fleet over the fake Auto Scaling group: booking, scaling, scale-in
// protection, a restart that reconciles with the group, and scale-in.
func TestFleetOverAutoScalingGroup(t *testing.T) {
	cloud, key := fakeAWS(t, awsfake.Options{MaxSize: 3, BootTime: 200 * time.Millisecond,
		ListingLag: 300 * time.Millisecond, TerminateTime: 100 * time.Millisecond})
	cfg := scaler.Config{MaxInstances: 3, Policies: scaler.FixedPolicy(policy.Policy{IdleCount: 1})}
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g1, _ := newGroup(t, cloud, key, nil)
	f1, stop1 := runFleet(t, scaler.New(cfg, time.Now()), g1, st)

	// The idle pool: one instance, booted through the group. The listing
	// lag must not make berth ask twice.
	eventually(t, "an idle instance", func() bool { return f1.Counts().Slots["idle"] == 1 })
	if d := cloud.Group().Desired; d != 1 {
		t.Fatalf("desired capacity %d for an idle pool of 1, want 1", d)
	}

	// Booking: the job gets the idle instance, and berth reaches it over
	// SSH with the host key from the console output.
	if err := f1.Reserve("job-1"); err != nil {
		t.Fatal(err)
	}
	acq, err := f1.Acquire(context.Background(), "job-1")
	if err != nil {
		t.Fatal(err)
	}
	out, err := executor.Output(context.Background(), acq.Connect, "echo job-1 ran in $(basename $HOME)", time.Minute)
	if err != nil || string(out) != "job-1 ran in "+acq.Instance+"\n" {
		t.Fatalf("job on %s through berth's executor: %q, %v", acq.Instance, out, err)
	}

	// Scaling: two more jobs fill the group to MaxSize and no further.
	for _, k := range []string{"job-2", "job-3"} {
		if err := f1.Reserve(k); err != nil {
			t.Fatalf("Reserve(%s): %v", k, err)
		}
		if _, err := f1.Acquire(context.Background(), k); err != nil {
			t.Fatalf("Acquire(%s): %v", k, err)
		}
	}
	if g := cloud.Group(); g.Desired != 3 || g.InGroup != 3 {
		t.Fatalf("group %+v with 3 jobs, want desired 3 and 3 instances", g)
	}

	// Scale-in protection: someone lowers desired capacity in the console;
	// the group terminates nothing, every job keeps its instance.
	eventually(t, "every instance protected", func() bool {
		for _, id := range groupIDs(cloud) {
			if in, _ := cloud.Instance(id); !in.Protected {
				return false
			}
		}
		return true
	})
	cloud.SetDesired(0)
	if ids := groupIDs(cloud); len(ids) != 3 {
		t.Fatalf("group holds %v after desired capacity 0; protection should keep all 3", ids)
	}
	cloud.SetDesired(3)
	before := fleetIDs(f1)

	// Restart: berth stops with jobs running (they die with it) and comes
	// back from its state file with a fresh provider.
	stop1()
	saved, ok, err := st.Load()
	if err != nil || !ok {
		t.Fatalf("Load: %v, %v", ok, err)
	}
	core, dead, err := scaler.Restore(cfg, saved, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 3 {
		t.Errorf("%d dead jobs after the restart, want 3", len(dead))
	}
	g2, _ := newGroup(t, cloud, key, nil)
	f2, stop2 := runFleet(t, core, g2, st)
	defer stop2()

	// Reconciliation and scale-in: the dead jobs' instances are adopted
	// idle; with idle_count 1 and idle_time 0 berth deletes two of them
	// through the group, which launches no replacements.
	eventually(t, "the group trimmed to the idle pool", func() bool { return len(groupIDs(cloud)) == 1 && f2.Counts().Slots["idle"] == 1 })
	kept := groupIDs(cloud)
	if !slices.Contains(before, kept[0]) {
		t.Errorf("the instance kept, %s, is not one of those before the restart, %v", kept[0], before)
	}
	eventually(t, "berth to see the deleted instances gone", func() bool { return slices.Equal(fleetIDs(f2), kept) })
	if g := cloud.Group(); g.Desired != 1 {
		t.Errorf("desired capacity %d after scale-in to 1, want 1", g.Desired)
	}
	if n := len(cloud.Instances()); n != 3 {
		t.Errorf("%d instances launched in all, want 3: the restart or the scale-in launched more", n)
	}

	// The next job takes the adopted instance.
	if err := f2.Reserve("job-4"); err != nil {
		t.Fatal(err)
	}
	acq, err = f2.Acquire(context.Background(), "job-4")
	if err != nil {
		t.Fatal(err)
	}
	if acq.Instance != kept[0] {
		t.Errorf("job-4 runs on %s, want the idle adopted instance %s", acq.Instance, kept[0])
	}
}
