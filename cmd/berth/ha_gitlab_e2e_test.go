package main

// End-to-end tests of the GitLab job ledger under [ha] (docs/ha.md "GitLab
// jobs"): two `berth run` processes share a fleet through an embedded etcd
// and take jobs from the GitLab fake in the test process.

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/berth-ci/berth/internal/gitlabfake"
)

// haGitLab starts a GitLab fake and returns it and the managers' config:
// max 1 instance, the GitLab source, a 1 s shutdown grace.
func haGitLab(t *testing.T) (*gitlabfake.Fake, string) {
	fake := gitlabfake.New(gitlabfake.Options{Token: "glrt-ha", TraceUpdateInterval: 1})
	t.Cleanup(fake.Close)
	toml := fmt.Sprintf(`shutdown_timeout = "1s"
[autoscaler]
max_instances = 1
[[autoscaler.policy]]
idle_count = 0
preemptive_mode = false
[[source]]
kind = "gitlab"
url = %q
token = "glrt-ha"
check_interval = "100ms"
`, fake.URL())
	return fake, toml
}

// addSleeper adds a job that prints "started" and sleeps.
func addSleeper(fake *gitlabfake.Fake) int64 {
	return fake.AddJob(gitlabfake.JobSpec{Script: []string{"echo started", "sleep 303"},
		Variables: []gitlabfake.Variable{{Key: "GIT_STRATEGY", Value: "none"}}})
}

// leaderRunningAGitLabJob starts a leader a and a standby b sharing one
// etcd and a GitLab fake, and returns once a's job id runs.
func leaderRunningAGitLabJob(t *testing.T) (fake *gitlabfake.Fake, id int64, f *haFleet, a, b *daemon) {
	t.Helper()
	fake, toml := haGitLab(t)
	id = addSleeper(fake)
	f = newHAFleet(t, 1, toml)
	a = f.manager()
	a.waitRole(30*time.Second, "leader")
	b = f.manager()
	b.waitRole(30*time.Second, "standby")
	runningOnLeader(t, fake, id)
	return fake, id, f, a, b
}

// runningOnLeader waits until the job's script runs on the leader.
func runningOnLeader(t *testing.T, fake *gitlabfake.Fake, id int64) {
	t.Helper()
	waitFor(t, 2*time.Minute, "the GitLab job to start on the leader", func() bool {
		return strings.Contains(fake.Job(id).Trace(), "started")
	})
	if st := fake.Job(id).State(); st != gitlabfake.StateRunning {
		t.Fatalf("the job is %s on GitLab while it runs", st)
	}
}

// ledgerKeys lists the GitLab ledger's keys in the fleet's etcd.
func (f *haFleet) ledgerKeys() []string {
	f.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: f.etcd.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		f.t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/e2e/gitlab-jobs/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		f.t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys
}

// kill -9 of the leader while it runs a GitLab job: the leader never comes
// back, so nobody would tell GitLab, and GitLab would keep the job running
// until its own timeout (hours). The standby takes over and, at the start
// of its term, fails the job on GitLab with the runner's own failure
// reason, from the record the dead leader left in etcd.
func TestHAKill9LeaderItsGitLabJobIsFailedByTheNewLeader(t *testing.T) {
	fake, id, f, a, b := leaderRunningAGitLabJob(t)

	a.kill9()
	killed := time.Now()
	b.waitRole(haLease+10*time.Second, "leader")
	waitFor(t, time.Minute, "the new leader to end the dead leader's GitLab job", func() bool {
		return fake.Job(id).State() != gitlabfake.StateRunning
	})
	t.Logf("kill -9 of the leader → its GitLab job ended on GitLab after %v", time.Since(killed).Round(10*time.Millisecond))
	j := fake.Job(id)
	if j.State() != gitlabfake.StateFailed || j.FailureReason() != "runner_system_failure" {
		t.Errorf("the dead leader's job is %s (%q) on GitLab, want failed (runner_system_failure)", j.State(), j.FailureReason())
	}
	if !strings.Contains(b.log.String(), "gitlab job lost by berth marked failed on GitLab") {
		t.Errorf("the new leader's log does not say it failed the job")
	}
	waitFor(t, 30*time.Second, "the new leader to forget the job it failed", func() bool { return len(f.ledgerKeys()) == 0 })
}

// A leader stopped cleanly (SIGTERM) while it runs a GitLab job: the job
// is canceled at the end of the grace period and its final state reaches
// GitLab before the leader hands over; GitLab does not keep it running,
// and the new leader has nothing of it left to fail.
func TestHALeaderStoppedCleanlyLeavesItsGitLabJobFailed(t *testing.T) {
	fake, id, f, a, b := leaderRunningAGitLabJob(t)

	if keys := f.ledgerKeys(); len(keys) != 1 {
		t.Errorf("the ledger holds %v while the job runs, want its one key", keys)
	}
	a.stop()
	if st := fake.Job(id).State(); st != gitlabfake.StateFailed {
		t.Errorf("the job of the leader stopped cleanly is %s on GitLab, want failed", st)
	}
	if keys := f.ledgerKeys(); len(keys) != 0 {
		t.Errorf("the leader stopped cleanly left %v in the ledger", keys)
	}
	b.waitRole(haLease+10*time.Second, "leader")
}

// A manager that leads a second time sweeps again: A leads (its first
// job request already swept), is paused past its lease and resumes as the
// standby; B leads and takes a GitLab job, then is killed for good. A's
// second term fails B's job on GitLab.
func TestHAManagerLeadingAgainFailsTheJobsOfTheTermBefore(t *testing.T) {
	fake, toml := haGitLab(t)
	f := newHAFleet(t, 1, toml)
	a := f.manager()
	a.waitRole(30*time.Second, "leader")
	b := f.manager()
	b.waitRole(30*time.Second, "standby")
	waitFor(t, time.Minute, "the leader to ask GitLab for a job", func() bool { return fake.RequestCount() > 0 })

	a.cmd.Process.Signal(syscall.SIGSTOP)
	b.waitRole(haLease+10*time.Second, "leader")
	a.cmd.Process.Signal(syscall.SIGCONT)
	a.waitRole(30*time.Second, "standby")
	id := addSleeper(fake)
	runningOnLeader(t, fake, id)

	b.kill9()
	a.waitRole(haLease+10*time.Second, "leader")
	waitFor(t, time.Minute, "the manager leading again to end the dead leader's GitLab job", func() bool {
		return fake.Job(id).State() != gitlabfake.StateRunning
	})
	if j := fake.Job(id); j.State() != gitlabfake.StateFailed {
		t.Errorf("the dead leader's job is %s on GitLab, want failed", j.State())
	}
}
