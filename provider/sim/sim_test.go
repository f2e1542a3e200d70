package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/provider"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// vclock is a virtual clock a test advances by hand.
type vclock struct{ t time.Time }

func (c *vclock) now() time.Time      { return c.t }
func (c *vclock) set(d time.Duration) { c.t = t0.Add(d) }
func (c *vclock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *vclock               { return &vclock{t: t0} }
func sec(n float64) time.Duration     { return time.Duration(n * float64(time.Second)) }
func newGroup(cfg Config) (*Group, *vclock) {
	c := newClock()
	return New(cfg, c.now), c
}

var ctx = context.Background()

// listOf renders Update as "id=state id=state", in the order reported.
func listOf(t *testing.T, g *Group) string {
	t.Helper()
	var parts []string
	if err := g.Update(ctx, func(id string, s provider.State) {
		parts = append(parts, id+"="+string(s))
	}); err != nil {
		t.Fatalf("Update: %v", err)
	}
	return strings.Join(parts, " ")
}

func mustIncrease(t *testing.T, g *Group, n int) {
	t.Helper()
	got, err := g.Increase(ctx, n)
	if err != nil || got != n {
		t.Fatalf("Increase(%d) = %d, %v; want %d, nil", n, got, err, n)
	}
}

func mustAccept(t *testing.T, what string, got []string, err error, want ...string) {
	t.Helper()
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("%s = %v, %v; want %v, nil", what, got, err, want)
	}
}

// step is one moment of a lifecycle script: at offset at from t0, run do
// (if any), then check the listing.
type step struct {
	at   time.Duration
	do   func(t *testing.T, g *Group)
	want string
}

func inc(n int) func(*testing.T, *Group) {
	return func(t *testing.T, g *Group) { mustIncrease(t, g, n) }
}

func dec(ids ...string) func(*testing.T, *Group) {
	return func(t *testing.T, g *Group) {
		got, err := g.Decrease(ctx, ids)
		mustAccept(t, "Decrease", got, err, ids...)
	}
}

func susp(ids ...string) func(*testing.T, *Group) {
	return func(t *testing.T, g *Group) {
		got, err := g.Suspend(ctx, ids)
		mustAccept(t, "Suspend", got, err, ids...)
	}
}

func res(ids ...string) func(*testing.T, *Group) {
	return func(t *testing.T, g *Group) {
		got, err := g.Resume(ctx, ids)
		mustAccept(t, "Resume", got, err, ids...)
	}
}

func kill(id string) func(*testing.T, *Group) {
	return func(t *testing.T, g *Group) {
		if err := g.Kill(id); err != nil {
			t.Fatalf("Kill(%s): %v", id, err)
		}
	}
}

func TestLifecycle(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		steps []step
	}{
		{
			name: "boot",
			cfg:  Config{BootTime: sec(60)},
			steps: []step{
				{0, inc(2), "sim-000001=creating sim-000002=creating"},
				{sec(59.999), nil, "sim-000001=creating sim-000002=creating"},
				{sec(60), nil, "sim-000001=running sim-000002=running"},
				{sec(61), inc(1), "sim-000001=running sim-000002=running sim-000003=creating"},
				{sec(121), nil, "sim-000001=running sim-000002=running sim-000003=running"},
			},
		},
		{
			name: "zero latencies take effect within the call",
			cfg:  Config{SupportsSuspend: true},
			steps: []step{
				{0, inc(1), "sim-000001=running"},
				{0, susp("sim-000001"), "sim-000001=suspended"},
				{0, res("sim-000001"), "sim-000001=running"},
				{0, dec("sim-000001"), ""},
			},
		},
		{
			name: "listing lag shorter than boot lists creating",
			cfg:  Config{BootTime: sec(60), ListingLag: sec(10)},
			steps: []step{
				{0, inc(1), ""},
				{sec(9), nil, ""},
				{sec(10), nil, "sim-000001=creating"},
				{sec(60), nil, "sim-000001=running"},
			},
		},
		{
			name: "listing lag longer than boot lists running",
			cfg:  Config{BootTime: sec(60), ListingLag: sec(90)},
			steps: []step{
				{0, inc(1), ""},
				{sec(89), nil, ""},
				{sec(90), nil, "sim-000001=running"},
			},
		},
		{
			name: "listing lag per Increase",
			cfg:  Config{BootTime: sec(30), ListingLag: sec(10)},
			steps: []step{
				{0, inc(1), ""},
				{sec(5), inc(1), ""},
				{sec(10), nil, "sim-000001=creating"},
				{sec(15), nil, "sim-000001=creating sim-000002=creating"},
				{sec(30), nil, "sim-000001=running sim-000002=creating"},
				{sec(35), nil, "sim-000001=running sim-000002=running"},
			},
		},
		{
			name: "delete then gone",
			cfg:  Config{BootTime: sec(10), DeleteLatency: sec(30)},
			steps: []step{
				{0, inc(2), "sim-000001=creating sim-000002=creating"},
				{sec(20), dec("sim-000001"), "sim-000001=deleting sim-000002=running"},
				{sec(49), nil, "sim-000001=deleting sim-000002=running"},
				{sec(50), nil, "sim-000002=running"},
			},
		},
		{
			name: "delete while creating",
			cfg:  Config{BootTime: sec(60), DeleteLatency: sec(5)},
			steps: []step{
				{0, inc(1), "sim-000001=creating"},
				{sec(1), dec("sim-000001"), "sim-000001=deleting"},
				{sec(60), nil, ""},
			},
		},
		{
			name: "delete twice keeps the first completion time",
			cfg:  Config{DeleteLatency: sec(30)},
			steps: []step{
				{0, inc(1), "sim-000001=running"},
				{sec(10), dec("sim-000001"), "sim-000001=deleting"},
				{sec(20), dec("sim-000001"), "sim-000001=deleting"},
				{sec(40), nil, ""},
			},
		},
		{
			name: "report deleted once",
			cfg:  Config{DeleteLatency: sec(30), ReportDeleted: true},
			steps: []step{
				{0, inc(2), "sim-000001=running sim-000002=running"},
				{sec(10), dec("sim-000001"), "sim-000001=deleting sim-000002=running"},
				{sec(40), nil, "sim-000002=running sim-000001=deleted"},
				{sec(40), nil, "sim-000002=running"},
				{sec(41), kill("sim-000002"), "sim-000002=deleted"},
				{sec(42), nil, ""},
			},
		},
		{
			name: "report deleted skips never-listed instances",
			cfg:  Config{ListingLag: sec(10), ReportDeleted: true},
			steps: []step{
				{0, inc(1), ""},
				{sec(5), kill("sim-000001"), ""},
				{sec(20), nil, ""},
			},
		},
		{
			name: "suspend and resume",
			cfg:  Config{BootTime: sec(10), SuspendLatency: sec(5), ResumeLatency: sec(7), SupportsSuspend: true},
			steps: []step{
				{0, inc(1), "sim-000001=creating"},
				{sec(10), susp("sim-000001"), "sim-000001=suspending"},
				{sec(14), nil, "sim-000001=suspending"},
				{sec(15), nil, "sim-000001=suspended"},
				{sec(100), res("sim-000001"), "sim-000001=resuming"},
				{sec(107), nil, "sim-000001=running"},
			},
		},
		{
			name: "delete while suspending",
			cfg:  Config{SuspendLatency: sec(5), DeleteLatency: sec(1), SupportsSuspend: true},
			steps: []step{
				{0, inc(1), "sim-000001=running"},
				{sec(1), susp("sim-000001"), "sim-000001=suspending"},
				{sec(2), dec("sim-000001"), "sim-000001=deleting"},
				// The suspension never completes.
				{sec(3), nil, ""},
			},
		},
		{
			name: "never ready",
			cfg:  Config{BootTime: sec(10), NeverReadyRate: 1},
			steps: []step{
				{0, inc(1), "sim-000001=creating"},
				{1000 * time.Hour, nil, "sim-000001=creating"},
				{1000 * time.Hour, dec("sim-000001"), ""},
			},
		},
		{
			name: "kill",
			cfg:  Config{BootTime: sec(10)},
			steps: []step{
				{0, inc(3), "sim-000001=creating sim-000002=creating sim-000003=creating"},
				{sec(5), kill("sim-000002"), "sim-000001=creating sim-000003=creating"},
				{sec(10), kill("sim-000003"), "sim-000001=running"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, clk := newGroup(tt.cfg)
			for i, s := range tt.steps {
				clk.set(s.at)
				if s.do != nil {
					s.do(t, g)
				}
				if got := listOf(t, g); got != s.want {
					t.Fatalf("step %d at %v: listing %q, want %q", i, s.at, got, s.want)
				}
			}
		})
	}
}

func TestListingLagInstanceExistsMeanwhile(t *testing.T) {
	g, clk := newGroup(Config{BootTime: sec(5), ListingLag: sec(20), Quota: 1})
	mustIncrease(t, g, 1)
	clk.set(sec(6))
	if got := listOf(t, g); got != "" {
		t.Fatalf("listing during lag = %q, want none", got)
	}
	// Hidden but running, billed and holding quota.
	if err := g.Heartbeat(ctx, "sim-000001"); err != nil {
		t.Fatalf("Heartbeat during lag: %v", err)
	}
	if n, err := g.Increase(ctx, 1); n != 0 || !errors.Is(err, ErrQuota) {
		t.Fatalf("Increase during lag = %d, %v; want 0, ErrQuota", n, err)
	}
	want := []InstanceInfo{{ID: "sim-000001", State: provider.StateRunning, Listed: false, Created: t0}}
	if got := g.Instances(); !slices.Equal(got, want) {
		t.Fatalf("Instances = %+v, want %+v", got, want)
	}
	if got := g.BilledSeconds(clk.now()); got != 6 {
		t.Fatalf("BilledSeconds = %v, want 6", got)
	}
	if got := g.NextEventTime(); !got.Equal(t0.Add(sec(20))) {
		t.Fatalf("NextEventTime = %v, want listing at +20s", got)
	}
}

func TestQuota(t *testing.T) {
	g, clk := newGroup(Config{Quota: 3, DeleteLatency: sec(10)})
	mustIncrease(t, g, 2)

	n, err := g.Increase(ctx, 2)
	if n != 1 || !errors.Is(err, ErrQuota) {
		t.Fatalf("Increase over quota = %d, %v; want 1, ErrQuota", n, err)
	}
	n, err = g.Increase(ctx, 1)
	if n != 0 || !errors.Is(err, ErrQuota) {
		t.Fatalf("Increase at quota = %d, %v; want 0, ErrQuota", n, err)
	}

	// A deleting instance still holds quota until it is gone.
	got, err := g.Decrease(ctx, []string{"sim-000001"})
	mustAccept(t, "Decrease", got, err, "sim-000001")
	clk.add(sec(9))
	if n, err := g.Increase(ctx, 1); n != 0 || !errors.Is(err, ErrQuota) {
		t.Fatalf("Increase while deleting = %d, %v; want 0, ErrQuota", n, err)
	}
	clk.add(sec(1))
	mustIncrease(t, g, 1)

	st := g.Stats()
	if st.Requested != 7 || st.Created != 4 || st.QuotaErrors != 3 || st.IncreaseErrors != 3 || st.Live != 3 || st.Peak != 3 {
		t.Fatalf("Stats = %+v", st)
	}
}

func TestIncreaseFailuresDeterministic(t *testing.T) {
	run := func(seed uint64) []string {
		g, clk := newGroup(Config{IncreaseFailRate: 0.3, Seed: seed, BootJitter: sec(30), NeverReadyRate: 0.1})
		var trace []string
		for i := range 200 {
			clk.set(time.Duration(i) * time.Second)
			n, err := g.Increase(ctx, 5)
			switch {
			case err == nil:
				if n != 5 {
					t.Fatalf("Increase = %d, nil; want 5", n)
				}
			case errors.Is(err, ErrIncreaseFailed):
				if n < 0 || n >= 5 {
					t.Fatalf("failed Increase = %d; want 0..4", n)
				}
			default:
				t.Fatalf("Increase error %v does not wrap ErrIncreaseFailed", err)
			}
			trace = append(trace, fmt.Sprintf("%d:%v", n, err != nil))
		}
		trace = append(trace, g.NextEventTime().String())
		for _, in := range g.Instances() {
			trace = append(trace, fmt.Sprint(in.ID, in.State, in.NeverReady))
		}
		return trace
	}
	a, b := run(42), run(42)
	if !slices.Equal(a, b) {
		t.Fatal("two runs with seed 42 differ")
	}
	if slices.Equal(a, run(43)) {
		t.Fatal("seeds 42 and 43 gave identical runs; the seed is ignored")
	}
	var failed, partial int
	for _, s := range a[:200] {
		if strings.HasSuffix(s, "true") {
			failed++
			if !strings.HasPrefix(s, "0:") {
				partial++
			}
		}
	}
	// 200 calls at 30%: far outside these bounds only if the rate is wrong.
	if failed < 30 || failed > 90 || partial == 0 || partial == failed {
		t.Fatalf("failed %d calls (%d partly) of 200 at rate 0.3", failed, partial)
	}
}

func TestQuotaAndFailureTogether(t *testing.T) {
	g, _ := newGroup(Config{Quota: 2, IncreaseFailRate: 1})
	n, err := g.Increase(ctx, 5)
	if n >= 2 || !errors.Is(err, ErrQuota) || !errors.Is(err, ErrIncreaseFailed) {
		t.Fatalf("Increase = %d, %v; want <2 and both errors", n, err)
	}
}

func TestSuspendResumeErrors(t *testing.T) {
	g, clk := newGroup(Config{BootTime: sec(10), SupportsSuspend: true, SuspendLatency: sec(1)})
	mustIncrease(t, g, 2)
	clk.set(sec(10))
	got, err := g.Suspend(ctx, []string{"sim-000001", "nope"})
	if !slices.Equal(got, []string{"sim-000001"}) || !errors.Is(err, ErrUnknownInstance) {
		t.Fatalf("Suspend = %v, %v", got, err)
	}
	got, err = g.Resume(ctx, []string{"sim-000001", "sim-000002"})
	if len(got) != 0 || !errors.Is(err, ErrInvalidState) {
		t.Fatalf("Resume of suspending and running = %v, %v; want none, ErrInvalidState", got, err)
	}
	if err := g.Heartbeat(ctx, "sim-000001"); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("Heartbeat of suspending = %v, want ErrInvalidState", err)
	}

	g2, _ := newGroup(Config{})
	info, err := g2.Init(ctx, provider.Settings{})
	if err != nil || info.Capabilities.Suspend {
		t.Fatalf("Init = %+v, %v; want no suspend capability", info, err)
	}
	mustIncrease(t, g2, 1)
	if _, err := g2.Suspend(ctx, []string{"sim-000001"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Suspend without support = %v, want ErrUnsupported", err)
	}
	if _, err := g2.Resume(ctx, []string{"sim-000001"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("Resume without support = %v, want ErrUnsupported", err)
	}
}

func TestKillAndHeartbeat(t *testing.T) {
	g, clk := newGroup(Config{BootTime: sec(10)})
	mustIncrease(t, g, 2)
	if err := g.Heartbeat(ctx, "sim-000001"); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("Heartbeat while creating = %v, want ErrInvalidState", err)
	}
	clk.set(sec(10))
	if err := g.Heartbeat(ctx, "sim-000001"); err != nil {
		t.Fatalf("Heartbeat while running = %v", err)
	}
	ci, err := g.ConnectInfo(ctx, "sim-000001")
	if err != nil || ci.ID != "sim-000001" || !strings.HasSuffix(ci.Addr, ".invalid:22") {
		t.Fatalf("ConnectInfo = %+v, %v", ci, err)
	}
	clk.set(sec(25))
	if err := g.Kill("sim-000001"); err != nil {
		t.Fatal(err)
	}
	if err := g.Kill("sim-000001"); !errors.Is(err, ErrUnknownInstance) {
		t.Fatalf("second Kill = %v, want ErrUnknownInstance", err)
	}
	if err := g.Heartbeat(ctx, "sim-000001"); !errors.Is(err, ErrUnknownInstance) {
		t.Fatalf("Heartbeat of killed = %v, want ErrUnknownInstance", err)
	}
	if _, err := g.ConnectInfo(ctx, "sim-000001"); !errors.Is(err, ErrUnknownInstance) {
		t.Fatalf("ConnectInfo of killed = %v, want ErrUnknownInstance", err)
	}
	got, err := g.Decrease(ctx, []string{"sim-000001", "sim-000002"})
	if !slices.Equal(got, []string{"sim-000002"}) || !errors.Is(err, ErrUnknownInstance) {
		t.Fatalf("Decrease = %v, %v", got, err)
	}
	st := g.Stats()
	if st.Lost != 1 || st.Deleted != 1 || st.Live != 0 {
		t.Fatalf("Stats = %+v; want 1 lost, 1 deleted, 0 live", st)
	}
	// Killed at 25s, deleted at 25s with no delete latency.
	if st.BilledSeconds != 50 {
		t.Fatalf("BilledSeconds = %v, want 50", st.BilledSeconds)
	}
}

func TestMeanTimeToFailure(t *testing.T) {
	g, clk := newGroup(Config{BootTime: sec(30), MeanTimeToFailure: time.Hour, Seed: 7})
	mustIncrease(t, g, 100)
	// Jump from event to event as the bench does; every instance must
	// eventually fail, and never before it was created.
	for steps := 0; ; steps++ {
		next := g.NextEventTime()
		if next.IsZero() {
			break
		}
		if !next.After(clk.now()) {
			t.Fatalf("NextEventTime %v not after clock %v", next, clk.now())
		}
		if steps > 1000 {
			t.Fatal("event loop does not terminate")
		}
		clk.t = next
		g.Update(ctx, func(string, provider.State) {})
	}
	st := g.Stats()
	if st.Lost != 100 || st.Live != 0 {
		t.Fatalf("Stats = %+v; want all 100 lost", st)
	}
	// The mean lifetime of 100 exponential draws with mean 1h.
	mean := st.BilledSeconds / 100
	if mean < 2400 || mean > 4800 {
		t.Fatalf("mean lifetime %vs, want about 3600s", mean)
	}
}

func TestBilling(t *testing.T) {
	g, clk := newGroup(Config{DeleteLatency: sec(20), BootTime: sec(5)})
	mustIncrease(t, g, 1) // A at 0
	clk.set(sec(50))
	mustIncrease(t, g, 1) // B at 50
	clk.set(sec(70))
	if err := g.Kill("sim-000002"); err != nil { // B: 20s
		t.Fatal(err)
	}
	clk.set(sec(100))
	got, err := g.Decrease(ctx, []string{"sim-000001"})
	mustAccept(t, "Decrease", got, err, "sim-000001") // A: 0..120
	clk.set(sec(100.5))
	mustIncrease(t, g, 1) // C at 100.5

	tests := []struct {
		now  time.Duration
		want float64
	}{
		{sec(100.5), 100.5 + 20 + 0},
		{sec(110), 110 + 20 + 9.5},
		// A's deletion completing at 120s is already scheduled, so the
		// bill for a later now stops there.
		{sec(200), 120 + 20 + 99.5},
	}
	for _, tt := range tests {
		if got := g.BilledSeconds(t0.Add(tt.now)); got != tt.want {
			t.Errorf("BilledSeconds(+%v) = %v, want %v", tt.now, got, tt.want)
		}
	}
	clk.set(sec(200))
	st := g.Stats()
	if st.BilledSeconds != 239.5 || st.Deleted != 1 || st.Lost != 1 || st.Live != 1 || st.Peak != 2 {
		t.Fatalf("Stats = %+v", st)
	}
}

func TestPeak(t *testing.T) {
	g, clk := newGroup(Config{DeleteLatency: sec(10)})
	mustIncrease(t, g, 3)
	got, err := g.Decrease(ctx, []string{"sim-000001", "sim-000002"})
	mustAccept(t, "Decrease", got, err, "sim-000001", "sim-000002")
	clk.set(sec(5))
	mustIncrease(t, g, 1) // deleting ones still count: 4
	clk.set(sec(10))
	mustIncrease(t, g, 1) // the two deletions completed first: 3
	if st := g.Stats(); st.Peak != 4 || st.Live != 3 {
		t.Fatalf("Peak %d, Live %d; want 4, 3", st.Peak, st.Live)
	}
}

func TestNextEventTime(t *testing.T) {
	g, clk := newGroup(Config{BootTime: sec(60), ListingLag: sec(10), SupportsSuspend: true, SuspendLatency: sec(3)})
	if got := g.NextEventTime(); !got.IsZero() {
		t.Fatalf("NextEventTime of empty group = %v, want zero", got)
	}
	mustIncrease(t, g, 1)
	wants := []time.Duration{sec(10), sec(60)}
	for _, w := range wants {
		got := g.NextEventTime()
		if !got.Equal(t0.Add(w)) {
			t.Fatalf("NextEventTime = %v, want +%v", got.Sub(t0), w)
		}
		clk.t = got
	}
	if got := g.NextEventTime(); !got.IsZero() {
		t.Fatalf("NextEventTime after boot = %v, want zero", got)
	}
	got, err := g.Suspend(ctx, []string{"sim-000001"})
	mustAccept(t, "Suspend", got, err, "sim-000001")
	if got := g.NextEventTime(); !got.Equal(t0.Add(sec(63))) {
		t.Fatalf("NextEventTime while suspending = +%v, want +63s", got.Sub(t0))
	}
}

func TestClockGoingBackwardsIsIgnored(t *testing.T) {
	g, clk := newGroup(Config{BootTime: sec(10)})
	mustIncrease(t, g, 1)
	clk.set(sec(10))
	if got := listOf(t, g); got != "sim-000001=running" {
		t.Fatalf("listing = %q", got)
	}
	clk.set(sec(5))
	if got := listOf(t, g); got != "sim-000001=running" {
		t.Fatalf("listing after clock went back = %q", got)
	}
}

func TestCallCounts(t *testing.T) {
	g, _ := newGroup(Config{SupportsSuspend: true})
	mustIncrease(t, g, 1)
	g.Update(ctx, func(string, provider.State) {})
	g.Update(ctx, func(string, provider.State) {})
	g.Heartbeat(ctx, "sim-000001")
	g.ConnectInfo(ctx, "sim-000001")
	g.Suspend(ctx, []string{"sim-000001"})
	g.Resume(ctx, []string{"sim-000001"})
	g.Decrease(ctx, []string{"sim-000001"})
	g.Decrease(ctx, []string{"sim-000001"})
	want := CallCounts{Increase: 1, Decrease: 2, Update: 2, Suspend: 1, Resume: 1, Heartbeat: 1, ConnectInfo: 1}
	if got := g.Stats().Calls; got != want {
		t.Fatalf("Calls = %+v, want %+v", got, want)
	}
}

func TestUpdateCallbackMayCallGroup(t *testing.T) {
	g, _ := newGroup(Config{})
	mustIncrease(t, g, 3)
	var beats int
	err := g.Update(ctx, func(id string, s provider.State) {
		if g.Heartbeat(ctx, id) == nil {
			beats++
		}
	})
	if err != nil || beats != 3 {
		t.Fatalf("Update = %v with %d heartbeats, want 3", err, beats)
	}
}

func TestCanceledContext(t *testing.T) {
	g, _ := newGroup(Config{})
	c, cancel := context.WithCancel(ctx)
	cancel()
	if n, err := g.Increase(c, 1); n != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("Increase = %d, %v", n, err)
	}
	if err := g.Update(c, func(string, provider.State) {}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Update = %v", err)
	}
}

// TestRandomOpsKeepInvariants runs random calls on random configurations
// and checks the event heap and counters against a brute-force view after
// each one.
func TestRandomOpsKeepInvariants(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 1))
		cfg := Config{
			BootTime:          sec(r.Float64() * 60),
			BootJitter:        sec(r.Float64() * 30),
			ListingLag:        sec(r.Float64() * 20),
			IncreaseFailRate:  r.Float64() * 0.3,
			NeverReadyRate:    r.Float64() * 0.1,
			MeanTimeToFailure: sec(600 + r.Float64()*3600),
			Quota:             r.IntN(40),
			SuspendLatency:    sec(r.Float64() * 10),
			ResumeLatency:     sec(r.Float64() * 10),
			DeleteLatency:     sec(r.Float64() * 30),
			Seed:              seed,
			SupportsSuspend:   true,
			ReportDeleted:     seed%2 == 0,
		}
		g, clk := newGroup(cfg)
		for range 2000 {
			if r.IntN(3) == 0 {
				if next := g.NextEventTime(); !next.IsZero() && r.IntN(2) == 0 {
					clk.t = next
				} else {
					clk.add(sec(r.Float64() * 30))
				}
			}
			ids := g.Instances()
			pick := func() []string {
				var out []string
				for range r.IntN(3) {
					if len(ids) > 0 {
						out = append(out, ids[r.IntN(len(ids))].ID)
					}
				}
				return out
			}
			switch r.IntN(6) {
			case 0:
				g.Increase(ctx, r.IntN(5))
			case 1:
				g.Decrease(ctx, pick())
			case 2:
				g.Suspend(ctx, pick())
			case 3:
				g.Resume(ctx, pick())
			case 4:
				if p := pick(); len(p) > 0 {
					g.Kill(p[0])
				}
			case 5:
				seen := map[string]bool{}
				g.Update(ctx, func(id string, s provider.State) {
					if seen[id] {
						t.Fatalf("seed %d: %s listed twice", seed, id)
					}
					seen[id] = true
					if !s.Valid() || s == provider.StateTimeout {
						t.Fatalf("seed %d: %s in state %q", seed, id, s)
					}
				})
			}
			checkInvariants(t, g)
		}
	}
}

func checkInvariants(t *testing.T, g *Group) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	live := 0
	var min time.Time
	for _, in := range g.order {
		if in.gone {
			if in.hidx != -1 {
				t.Fatalf("gone %s still in the event heap", in.id)
			}
			continue
		}
		live++
		next, ok := in.nextEvent()
		if ok != (in.hidx >= 0) {
			t.Fatalf("%s: has event %v, in heap %v", in.id, ok, in.hidx >= 0)
		}
		if ok {
			if !next.Equal(in.next) || !next.After(g.now) {
				t.Fatalf("%s: next %v (cached %v), clock %v", in.id, next, in.next, g.now)
			}
			if min.IsZero() || next.Before(min) {
				min = next
			}
		}
	}
	if live != g.live || live != len(g.byID) {
		t.Fatalf("live %d, counter %d, map %d", live, g.live, len(g.byID))
	}
	if g.cfg.Quota > 0 && live > g.cfg.Quota {
		t.Fatalf("live %d over quota %d", live, g.cfg.Quota)
	}
	if live > g.st.Peak {
		t.Fatalf("live %d over peak %d", live, g.st.Peak)
	}
	if g.st.Created != live+g.st.Deleted+g.st.Lost {
		t.Fatalf("created %d != live %d + deleted %d + lost %d", g.st.Created, live, g.st.Deleted, g.st.Lost)
	}
	for i, in := range g.events {
		if in.hidx != i {
			t.Fatalf("heap index of %s is %d, stored at %d", in.id, in.hidx, i)
		}
		if i > 0 && g.events.Less(i, (i-1)/2) {
			t.Fatalf("heap order broken at %d", i)
		}
	}
	if len(g.events) > 0 && !g.events[0].next.Equal(min) {
		t.Fatalf("heap top %v, brute-force minimum %v", g.events[0].next, min)
	}
}

// SuspendedSeconds counts the billed time instances spent suspended: from
// the end of the suspend to the resume call, the deletion call, or now.
func TestSuspendedSeconds(t *testing.T) {
	g, clk := newGroup(Config{BootTime: sec(10), SupportsSuspend: true, SuspendLatency: sec(2), ResumeLatency: sec(5)})
	mustIncrease(t, g, 2)
	clk.set(sec(10))
	got, err := g.Suspend(ctx, []string{"sim-000001", "sim-000002"})
	mustAccept(t, "Suspend", got, err, "sim-000001", "sim-000002")
	clk.set(sec(12)) // both suspended from 12s
	if n := g.Suspended(); n != 2 {
		t.Fatalf("Suspended() = %d, want 2", n)
	}
	clk.set(sec(20))
	got, err = g.Resume(ctx, []string{"sim-000001"}) // 8s suspended
	mustAccept(t, "Resume", got, err, "sim-000001")
	clk.set(sec(30))
	got, err = g.Decrease(ctx, []string{"sim-000002"}) // 18s suspended
	mustAccept(t, "Decrease", got, err, "sim-000002")
	clk.set(sec(40))
	if got := g.SuspendedSeconds(clk.now()); got != 26 {
		t.Fatalf("SuspendedSeconds = %v, want 8 + 18 = 26", got)
	}
	if n := g.Suspended(); n != 0 {
		t.Fatalf("Suspended() = %d after resume and delete, want 0", n)
	}
	if billed := g.BilledSeconds(clk.now()); billed < 26 {
		t.Fatalf("billed %v is less than the suspended part", billed)
	}
}
