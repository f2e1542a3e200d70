package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/api"
)

// TestPickupLatency measures how long a job waits from submission until its
// script runs, through the real binary on the local provider: "cold" with no
// idle instance (on-demand mode, idle_count 0, max_use_count 1, so every job
// boots a fresh sandbox) and "hot" with one warm idle instance; as root, both
// again with berth unprivileged. It is a
// measurement, not a check, so it only runs when asked:
//
//	BERTH_PICKUP_JOBS=40 go test -run PickupLatency -v ./cmd/berth/
//
// Each job's script prints the time it started; the submission time is taken
// just before the client's POST. Jobs run one after the other. With
// BERTH_PICKUP_PLUGIN=1 the local provider is served as a plugin
// (provider_path = berth-provider-local) instead of built in.
func TestPickupLatency(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BERTH_PICKUP_JOBS"))
	if n <= 0 {
		t.Skip("set BERTH_PICKUP_JOBS=N to run N cold and N hot jobs and report their pickup latency")
	}
	// As root, also measure an unprivileged berth (user namespaces, no
	// cgroups), the setup recommended for untrusted jobs.
	users := map[string][]string{"": nil}
	if setpriv, err := exec.LookPath("setpriv"); err == nil && os.Getuid() == 0 {
		users[" unprivileged"] = []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}
	}
	provider := ""
	if os.Getenv("BERTH_PICKUP_PLUGIN") != "" {
		provider = "provider_path = \"" + pluginBin(t, "cmd/berth-provider-local", "berth-provider-local") + "\"\n"
	}
	for user, prefix := range users {
		t.Run("cold"+user, func(t *testing.T) {
			d := newDaemon(t, `
[autoscaler]
`+provider+`max_instances = 4
max_use_count = 1
[[autoscaler.policy]]
idle_count = 0
preemptive_mode = false
`, prefix...)
			ps := pickups(t, d, n)
			seen := map[string]bool{}
			for _, p := range ps {
				if seen[p.instance] {
					t.Errorf("instance %s ran two jobs; with max_use_count = 1 every job must boot its own", p.instance)
				}
				seen[p.instance] = true
			}
			report(t, "cold"+user, ps)
		})
		t.Run("hot"+user, func(t *testing.T) {
			d := newDaemon(t, `
[autoscaler]
`+provider+`max_instances = 4
[[autoscaler.policy]]
idle_count = 1
`, prefix...)
			report(t, "hot"+user, pickups(t, d, n))
		})
	}
}

// pickup is one job's timeline, each step measured from submission.
type pickup struct {
	created, taken, script time.Duration
	instance               string
}

// pickups submits n jobs one after the other and returns their timelines.
// Before each job it waits until no instance is booting or deleting, so that
// a job never finds the previous job's work still in progress.
func pickups(t *testing.T, d *daemon, n int) []pickup {
	ctx := context.Background()
	c := d.client()
	var out []pickup
	for i := range n + 1 {
		waitFor(t, time.Minute, "a settled fleet", func() bool {
			insts, err := c.Instances(ctx)
			if err != nil {
				return false
			}
			for _, in := range insts {
				if in.State != "ready" {
					return false
				}
			}
			return true
		})
		submitted := time.Now()
		j, err := c.Submit(ctx, api.JobRequest{Script: "date +%s%N"})
		if err != nil {
			t.Fatal(err)
		}
		done := d.waitJobsQuick(t, j.ID)
		var log bytes.Buffer
		if err := c.Log(ctx, j.ID, false, &log); err != nil {
			t.Fatal(err)
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(log.String()), 10, 64)
		if err != nil || done.StartedAt == nil {
			t.Fatalf("job %s: log %q, started_at %v: %v", j.ID, log.String(), done.StartedAt, err)
		}
		if i == 0 {
			continue // the first job also waits for the daemon's first listing
		}
		out = append(out, pickup{
			created:  done.CreatedAt.Sub(submitted),
			taken:    done.StartedAt.Sub(submitted),
			script:   time.Unix(0, ns).Sub(submitted),
			instance: done.Instance,
		})
	}
	return out
}

// waitJobsQuick waits for a job to end, polling often so the wait does not
// delay the next submission much.
func (d *daemon) waitJobsQuick(t *testing.T, id string) api.Job {
	deadline := time.Now().Add(time.Minute)
	for {
		j := d.job(id)
		if j.State.Done() {
			if j.State != api.JobSuccess {
				t.Fatalf("job %s ended %s: %s", id, j.State, j.Reason)
			}
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s after a minute", id, j.State)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func report(t *testing.T, name string, ps []pickup) {
	pct := func(f func(pickup) time.Duration, q float64) time.Duration {
		v := make([]time.Duration, len(ps))
		for i, p := range ps {
			v[i] = f(p)
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		return v[min(len(v)-1, int(q*float64(len(v))))]
	}
	row := func(what string, f func(pickup) time.Duration) string {
		return fmt.Sprintf("%s p50 %.1f ms, p95 %.1f ms", what,
			float64(pct(f, 0.5).Microseconds())/1000, float64(pct(f, 0.95).Microseconds())/1000)
	}
	t.Logf("%s pickup, %d jobs: %s; %s; %s", name, len(ps),
		row("submit→script start", func(p pickup) time.Duration { return p.script }),
		row("submit→job taken", func(p pickup) time.Duration { return p.taken }),
		row("submit→stored", func(p pickup) time.Duration { return p.created }))
}
