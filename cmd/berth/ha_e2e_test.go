package main

// End-to-end tests of two `berth run` processes sharing one fleet through
// etcd ([ha], docs/ha.md "Running two managers"): an embedded etcd in the
// test process, the real binaries, real sandboxes. Both managers run on
// this host with ONE local-provider state directory (ha.provider_state_dir):
// the local provider serves only the machine it runs on, so that is the
// only way two managers can share its instances; real HA runs the managers
// on different hosts with a cloud or plugin provider.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
	"github.com/berth-ci/berth/internal/etcdtest"
	"github.com/berth-ci/berth/internal/sandboxtest"
	"github.com/berth-ci/berth/jobsource/queue"
)

// haLease is the tests' ha.lease_ttl: the shortest etcd grants.
const haLease = 2 * time.Second

// haFleet is an etcd cluster, a shared provider directory and the API
// token every manager of the fleet shares.
type haFleet struct {
	t      *testing.T
	etcd   *etcdtest.Cluster
	shared string // ha.provider_state_dir
	token  []byte // the first manager's token file, copied to the others
	toml   string // [autoscaler] of every manager
}

// newHAFleet starts an embedded etcd of members (1 or 3) for the fleet.
func newHAFleet(t *testing.T, members int, autoscaler string) *haFleet {
	f := &haFleet{t: t, etcd: etcdtest.Start(t, members), shared: t.TempDir(), toml: autoscaler}
	// Registered before any manager, so it runs after they stopped.
	t.Cleanup(func() { removeSandboxes(t, f.shared) })
	return f
}

// manager starts one `berth run` of the fleet and waits for its /healthz.
func (f *haFleet) manager() *daemon {
	t := f.t
	t.Helper()
	d := &daemon{t: t, dir: t.TempDir(), listen: freeAddr(t)}
	state := filepath.Join(d.dir, "state")
	if f.token != nil {
		os.MkdirAll(state, 0o700)
		if err := os.WriteFile(api.TokenPath(state), f.token, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	eps, _ := json.Marshal(f.etcd.Endpoints)
	cfg := fmt.Sprintf("listen = %q\nstate_dir = %q\n%s\n[ha]\netcd_endpoints = %s\nlease_ttl = %q\nkey_prefix = \"/e2e/\"\nprovider_state_dir = %q\n",
		d.listen, state, f.toml, eps, haLease.String(), f.shared)
	if err := os.WriteFile(filepath.Join(d.dir, "berth.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.stop()
		if t.Failed() {
			t.Logf("berth %s log:\n%s", d.listen, d.log)
		}
	})
	d.start()
	if f.token == nil {
		f.token, _ = os.ReadFile(api.TokenPath(state))
	}
	return d
}

// haHealth is what the tests read of /healthz.
type haHealth struct {
	Status string `json:"status"`
	Role   string `json:"role"`
	Leader string `json:"leader"`
}

func (d *daemon) haHealth() haHealth {
	var h haHealth
	resp, err := healthClient.Get("http://" + d.listen + "/healthz")
	if err != nil {
		return h
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&h)
	return h
}

func (d *daemon) waitRole(timeout time.Duration, role string) {
	d.t.Helper()
	waitFor(d.t, timeout, fmt.Sprintf("berth %s to be %s", d.listen, role), func() bool { return d.haHealth().Role == role })
}

// watchInstances samples the number of instances in the shared provider
// directory until the test ends and returns the largest number seen and
// every instance ever seen.
func (f *haFleet) watchInstances() (peak *atomic.Int64, seen func() map[string]bool) {
	peak = &atomic.Int64{}
	var mu sync.Mutex
	all := map[string]bool{}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			entries, _ := os.ReadDir(filepath.Join(f.shared, "local", "instances"))
			n := int64(0)
			mu.Lock()
			for _, e := range entries {
				if !strings.HasPrefix(e.Name(), ".") {
					n++
					all[e.Name()] = true
				}
			}
			mu.Unlock()
			if n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	f.t.Cleanup(func() { close(stop); <-done })
	return peak, func() map[string]bool {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]bool{}
		for k := range all {
			out[k] = true
		}
		return out
	}
}

// submitRetrying submits through d until it is accepted: during a takeover
// a standby answers 503 until a leader is known.
func (d *daemon) submitRetrying(timeout time.Duration, args ...string) string {
	d.t.Helper()
	var id string
	waitFor(d.t, timeout, "a submit to be accepted", func() bool {
		out, _, code := d.berth(append([]string{"submit"}, args...)...)
		id = strings.TrimSpace(out)
		return code == 0 && id != ""
	})
	return id
}

// noJobProcessLeft waits until no sandbox process runs cmd.
func (f *haFleet) noJobProcessLeft(timeout time.Duration, cmd string) {
	f.t.Helper()
	waitFor(f.t, timeout, fmt.Sprintf("no sandbox process running %q", cmd), func() bool {
		for pid := range sandboxtest.Processes(f.shared) {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), cmd) {
				return false
			}
		}
		return true
	})
}

const haAutoscaler = `
[autoscaler]
max_instances = 3
[[autoscaler.policy]]
idle_count = 0
preemptive_mode = false
`

// kill -9 of the leader with jobs running and jobs queued (etcd: 3
// members): the standby takes over within lease_ttl + 10 s. No job is
// lost: the jobs queued at the kill, submitted through either manager,
// run on the new leader; the jobs running on the dead leader end failed
// with queue.FailoverReason (the new leader's TakeOver) and their
// processes end (the new leader resets their instances); both managers
// give the same answer for every job, its list entry and its log, and the
// killed manager restarted as a standby changes none of it. The fleet
// never exceeds max_instances, no instance is made twice, nothing is left
// behind.
func TestHAKill9LeaderStandbyTakesOver(t *testing.T) {
	f := newHAFleet(t, 3, haAutoscaler)
	peak, seen := f.watchInstances()
	a := f.manager()
	a.waitRole(30*time.Second, "leader")
	b := f.manager()
	b.waitRole(30*time.Second, "standby")

	// Three jobs fill max_instances; one submitted through the standby
	// (forwarded), two through the leader.
	running := []string{b.submit("--", "echo started; sleep 301")}
	for range 2 {
		running = append(running, a.submit("--", "echo started; sleep 301"))
	}
	waitFor(t, 2*time.Minute, "3 jobs to run on the leader", func() bool {
		for _, id := range running {
			if a.job(id).State != api.JobRunning {
				return false
			}
		}
		return true
	})
	// No slot left: these wait in the shared queue at the kill.
	queued := []string{a.submit("--", "echo queued on the leader"), b.submit("--", "echo queued through the standby")}
	for _, id := range queued {
		if st := a.job(id).State; st != api.JobQueued {
			t.Fatalf("job %s is %s before the kill, want queued", id, st)
		}
	}
	before := seen()
	a.kill9()
	killed := time.Now()

	id := b.submitRetrying(haLease+10*time.Second, "--", "echo after failover")
	waitFor(t, haLease+10*time.Second, "the new leader to start a job", func() bool {
		for _, q := range append([]string{id}, queued...) {
			if st := b.job(q).State; st == api.JobRunning || st == api.JobSuccess {
				return true
			}
		}
		return false
	})
	t.Logf("kill -9 of the leader → the standby started a job after %v", time.Since(killed).Round(10*time.Millisecond))
	for _, j := range b.waitJobs(time.Minute, append(queued, id)...) {
		if j.State != api.JobSuccess {
			t.Errorf("job %s queued at or submitted after the kill: %s (%s), want success on the new leader", j.ID, j.State, j.Reason)
		}
	}
	for _, j := range b.waitJobs(time.Minute, running...) {
		if j.State != api.JobFailed || j.Reason != queue.FailoverReason {
			t.Errorf("job %s running on the killed leader: %s %q, want failed %q", j.ID, j.State, j.Reason, queue.FailoverReason)
		}
	}
	if h := b.haHealth(); h.Role != "leader" {
		t.Errorf("new leader's /healthz role = %q", h.Role)
	}
	// The dead leader's jobs were killed by the resets of their instances.
	f.noJobProcessLeft(30*time.Second, "sleep 301")
	known := map[string]bool{}
	for _, in := range b.instances() {
		known[in.ID] = true
	}
	for id := range before {
		if !known[id] {
			t.Errorf("instance %s of the old leader is unknown to the new one", id)
		}
	}
	for pid, id := range sandboxtest.Processes(f.shared) {
		if !known[id] {
			t.Errorf("sandbox process %d of %s is orphaned", pid, id)
		}
	}
	if p := peak.Load(); p > 3 {
		t.Errorf("%d instances at once, above max_instances = 3", p)
	}
	if n := len(seen()); n > 3 {
		t.Errorf("%d instances were made with max_instances = 3 and resets between jobs: some demand was served twice", n)
	}

	all := slices.Concat(running, queued, []string{id})
	answer := b.jobAnswers(all)
	for _, rid := range running {
		if !strings.Contains(answer["logs "+rid], queue.FailoverReason) {
			t.Errorf("the log of job %s does not say why it failed:\n%s", rid, answer["logs "+rid])
		}
	}
	// The old leader restarts as a standby: it answers the same, and its
	// start changes no job (with the queue in etcd it has none of its own).
	a.start()
	a.waitRole(30*time.Second, "standby")
	time.Sleep(3 * time.Second) // time for a wrong restart rule to show
	for _, d := range []*daemon{a, b} {
		got := d.jobAnswers(all)
		for q, want := range answer {
			if got[q] != want {
				t.Errorf("berth %s via %s after the restart:\n%s\nwant (the new leader before the restart):\n%s", q, d.listen, got[q], want)
			}
		}
	}
}

// jobAnswers is what d says of the jobs ids: `berth jobs ID --json`,
// `berth logs ID` and the whole `berth jobs --json` list restricted to
// ids, keyed by the command.
func (d *daemon) jobAnswers(ids []string) map[string]string {
	d.t.Helper()
	out := map[string]string{}
	run := func(args ...string) string {
		var o string
		waitFor(d.t, 30*time.Second, fmt.Sprintf("berth %v via %s", args, d.listen), func() bool {
			var code int
			o, _, code = d.berth(args...)
			return code == 0
		})
		return o
	}
	for _, id := range ids {
		out["jobs "+id] = run("jobs", id, "--json")
		out["logs "+id] = run("logs", id)
	}
	var list api.JobList
	if err := json.Unmarshal([]byte(run("jobs", "--json")), &list); err != nil {
		d.t.Fatalf("berth jobs --json via %s: %v", d.listen, err)
	}
	var lines []string
	for _, j := range list.Jobs {
		if slices.Contains(ids, j.ID) {
			b, _ := json.Marshal(j)
			lines = append(lines, string(b))
		}
	}
	if len(lines) != len(ids) {
		d.t.Errorf("berth jobs via %s lists %d of the jobs %v", d.listen, len(lines), ids)
	}
	out["jobs"] = strings.Join(lines, "\n")
	return out
}

// providerCalls sums berth_provider_call_duration_seconds_count by method
// from d's /metrics.
func (d *daemon) providerCalls() map[string]int {
	resp, err := http.Get("http://" + d.listen + "/metrics")
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	re := regexp.MustCompile(`^berth_provider_call_duration_seconds_count\{method="([a-z_]+)"\} (\d+)`)
	calls := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			calls[m[1]], _ = strconv.Atoi(m[2])
		}
	}
	return calls
}

// A leader paused (SIGSTOP) for 30 s, far longer than its lease, loses the fleet to
// the standby; once it resumes it acts on nothing (no provider call that
// changes an instance or connects to one, no job start) and stands by.
// No job is lost: the job waiting in the shared queue runs on the new
// leader; the job running on the paused leader is failed by the new
// leader's TakeOver (queue.FailoverReason) and its instance reset, and the
// old leader, once resumed, cannot record another end for it: its Finish
// is refused by the fence, and the failover reason stands, read through
// either manager.
func TestHASigstoppedLeaderDoesNotActAfterResume(t *testing.T) {
	f := newHAFleet(t, 1, `
[autoscaler]
max_instances = 1
[[autoscaler.policy]]
idle_count = 0
preemptive_mode = false
`)
	a := f.manager()
	a.waitRole(30*time.Second, "leader")
	b := f.manager()
	b.waitRole(30*time.Second, "standby")
	first := a.submit("--", "echo started; sleep 302")
	waitFor(t, 2*time.Minute, "the first job to run", func() bool { return a.job(first).State == api.JobRunning })
	// The only instance is taken: this one waits in the shared queue.
	waiting := a.submit("--", "echo waited for the new leader")
	time.Sleep(500 * time.Millisecond)
	callsBefore := a.providerCalls()

	a.cmd.Process.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	b.waitRole(haLease+10*time.Second, "leader")
	f.noJobProcessLeft(30*time.Second, "sleep 302") // the new leader reset the dead job's instance
	if j := b.waitJobs(time.Minute, waiting)[0]; j.State != api.JobSuccess {
		t.Errorf("the job waiting at the pause: %s %q, want success on the new leader", j.State, j.Reason)
	}
	time.Sleep(time.Until(stopped.Add(30 * time.Second))) // the 30 s pause
	a.cmd.Process.Signal(syscall.SIGCONT)
	a.waitRole(10*time.Second, "standby")
	// The resumed leader's job saw its instance reset: it ends there and
	// its result is refused.
	waitFor(t, time.Minute, "the old leader to give up the result of its job", func() bool {
		return strings.Contains(a.log.String(), "job result not recorded")
	})
	time.Sleep(3 * time.Second) // time for any stale action to show

	after := a.providerCalls()
	for _, method := range []string{"increase", "decrease", "recycle", "connect_info", "suspend", "resume"} {
		if after[method] != callsBefore[method] {
			t.Errorf("the resumed old leader called the provider's %s %d times", method, after[method]-callsBefore[method])
		}
	}
	// One listing may have been in flight, or started between reading the
	// metrics and the SIGSTOP; a stale leader that kept listing would show
	// one every 2 s.
	if n := after["update"] - callsBefore["update"]; n > 1 {
		t.Errorf("the resumed old leader listed the provider %d times", n)
	}
	if !strings.Contains(a.log.String(), "lost leadership") {
		t.Errorf("the old leader never logged that it lost leadership")
	}
	for _, d := range []*daemon{a, b} {
		j := d.job(first)
		if j.State != api.JobFailed || j.Reason != queue.FailoverReason {
			t.Errorf("the paused leader's running job via %s: %s %q, want failed %q (the new leader's takeover)", d.listen, j.State, j.Reason, queue.FailoverReason)
		}
	}
	if j := a.job(waiting); j.State != api.JobSuccess {
		t.Errorf("the waiting job via the old leader: %s", j.State)
	}
}

// etcd lost while leading, then back: the leader stops acting within the
// lease (no provider call, no job taken) and stands by, while the job it
// runs goes on: nobody leads, so nobody resets its instance. Its result
// waits in the manager (the shared queue cannot be written), its log stays
// in memory. etcd back, the manager campaigns again, leads, records the
// success with the whole log, and runs new jobs.
func TestHAEtcdLostWhileLeading(t *testing.T) {
	f := newHAFleet(t, 1, haAutoscaler)
	a := f.manager()
	a.waitRole(30*time.Second, "leader")
	running := a.submit("--", "echo begun; sleep 8; echo done")
	// Running in the queue means taken, perhaps before its instance was
	// booted: wait for the script itself, so that no boot is in flight.
	waitFor(t, 2*time.Minute, "the job's script to run", func() bool {
		out, _, _ := a.berth("logs", running)
		return a.job(running).State == api.JobRunning && strings.Contains(out, "begun")
	})
	callsBefore := a.providerCalls()

	// An embedded member that stops keeps serving the streams already
	// open (the lease keepalives) for up to 7 s: the lease runs out after that.
	f.etcd.StopMember(0)
	a.waitRole(haLease+15*time.Second, "standby")
	time.Sleep(2 * time.Second)
	if h := a.haHealth(); h.Status == "ok" {
		t.Errorf("/healthz of a manager cut off from etcd says ok")
	}
	after := a.providerCalls()
	for _, method := range []string{"increase", "decrease", "recycle", "connect_info"} {
		if after[method] != callsBefore[method] {
			t.Errorf("the manager cut off from etcd called the provider's %s %d times", method, after[method]-callsBefore[method])
		}
	}
	f.noJobProcessLeft(30*time.Second, "sleep 8")
	waitFor(t, 30*time.Second, "the manager to hold the job's result", func() bool {
		return strings.Contains(a.log.String(), "cannot record the job result")
	})

	if err := f.etcd.RestartMember(0); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	a.waitRole(haLease+30*time.Second, "leader")
	t.Logf("etcd back → the manager leads again after %v", time.Since(back).Round(10*time.Millisecond))
	if j := a.waitJobs(time.Minute, running)[0]; j.State != api.JobSuccess {
		t.Errorf("the job running when etcd went away: %s %q, want success", j.State, j.Reason)
	}
	if out, _, _ := a.berth("logs", running); !strings.Contains(out, "begun") || !strings.Contains(out, "done") {
		t.Errorf("the log of the job that ran through the outage is incomplete:\n%s", out)
	}
	next := a.submit("--", "echo after etcd came back")
	if j := a.waitJobs(time.Minute, next)[0]; j.State != api.JobSuccess {
		t.Errorf("a job after etcd came back: %s %q", j.State, j.Reason)
	}
}

// TestHAFailoverFigures measures failover with the real binaries: 20 times,
// kill -9 the leader, time until the standby's /healthz says leader and
// until it runs a newly submitted job, then restart the killed manager as
// the next standby. Skipped unless BERTH_HA_FIGURES=1 (it takes about two
// minutes); docs/ha.md quotes its output:
//
//	BERTH_HA_FIGURES=1 go test ./cmd/berth -run TestHAFailoverFigures -v
func TestHAFailoverFigures(t *testing.T) {
	if os.Getenv("BERTH_HA_FIGURES") == "" {
		t.Skip("set BERTH_HA_FIGURES=1 to measure failover over 20 runs")
	}
	f := newHAFleet(t, 1, haAutoscaler)
	leader := f.manager()
	leader.waitRole(30*time.Second, "leader")
	standby := f.manager()
	standby.waitRole(30*time.Second, "standby")
	var takeovers, jobs []time.Duration
	for range 20 {
		leader.kill9()
		killed := time.Now()
		waitFor(t, haLease+10*time.Second, "the standby to lead", func() bool { return standby.haHealth().Role == "leader" })
		takeovers = append(takeovers, time.Since(killed))
		id := standby.submitRetrying(10*time.Second, "--", "true")
		waitFor(t, haLease+10*time.Second, "a job on the new leader", func() bool {
			st := standby.job(id).State
			return st == api.JobRunning || st == api.JobSuccess
		})
		jobs = append(jobs, time.Since(killed))
		leader.start()
		leader.waitRole(30*time.Second, "standby")
		leader, standby = standby, leader
	}
	p50, max := percentiles(takeovers)
	jp50, jmax := percentiles(jobs)
	t.Logf("lease_ttl %v, 20 kill -9 failovers: leader again p50 %v max %v; a new job running p50 %v max %v",
		haLease, p50, max, jp50, jmax)
}

// percentiles returns the median and the maximum of ds.
func percentiles(ds []time.Duration) (p50, max time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(10 * time.Millisecond), s[len(s)-1].Round(10 * time.Millisecond)
}

// TestHABookingLatencyFigures measures what [ha] adds to a job's start
// through the daemon: 20 jobs one after the other on a warm instance, each
// from its submit to its start (the job's created_at → started_at, both
// stamped by the leader: the job loop's wake-up, the booking saved, the
// job taken from the queue, the slot bound, the connection details, the
// start recorded), with state.db and queue.db (no [ha]) and with both in
// etcd (one embedded member, then three). Skipped unless BERTH_HA_FIGURES=1;
// docs/ha.md quotes its output:
//
//	BERTH_HA_FIGURES=1 go test ./cmd/berth -run TestHABookingLatencyFigures -v
func TestHABookingLatencyFigures(t *testing.T) {
	if os.Getenv("BERTH_HA_FIGURES") == "" {
		t.Skip("set BERTH_HA_FIGURES=1 to measure a booking's latency with and without [ha]")
	}
	const warm = `
[autoscaler]
max_instances = 1
[[autoscaler.policy]]
idle_count = 1
preemptive_mode = true
`
	measure := func(d *daemon) (p50, max time.Duration) {
		var lat []time.Duration
		for range 20 {
			// An idle slot first: the reset after the previous job is
			// not part of a booking.
			waitFor(t, 2*time.Minute, "an idle slot", func() bool {
				for _, in := range d.instances() {
					if in.Slots.Idle > 0 {
						return true
					}
				}
				return false
			})
			j := d.waitJobs(time.Minute, d.submit("--", "true"))[0]
			if j.State != api.JobSuccess || j.StartedAt == nil {
				t.Fatalf("job %s: %s %q", j.ID, j.State, j.Reason)
			}
			lat = append(lat, j.StartedAt.Sub(j.CreatedAt))
		}
		slices.Sort(lat)
		return lat[len(lat)/2].Round(100 * time.Microsecond), lat[len(lat)-1].Round(100 * time.Microsecond)
	}
	single := newDaemon(t, warm)
	sp50, smax := measure(single)
	single.stop()
	t.Logf("submit → job started on a warm instance, 20 jobs: state.db + queue.db p50 %v max %v", sp50, smax)
	for _, members := range []int{1, 3} {
		f := newHAFleet(t, members, warm)
		leader := f.manager()
		leader.waitRole(30*time.Second, "leader")
		hp50, hmax := measure(leader)
		leader.stop()
		t.Logf("submit → job started on a warm instance, 20 jobs: [ha], etcd of %d member(s) p50 %v max %v", members, hp50, hmax)
	}
}
