package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 32, item 2, on the real binaries: with the leader SIGSTOPped for
// 30 s, a submit through the standby blocked for the whole pause, even
// after the standby itself took over 2.7 s in. Now the standby gives up
// the forward once it leads and serves the submit itself (the CLI's
// submit carries an idempotency key, so it cannot apply twice): the
// submit is answered while the old leader is still stopped, and once the
// old leader resumes (and reads the request it had been sent) the job
// exists once.
func TestHAForwardToFrozenLeaderIsRerouted(t *testing.T) {
	f := newHAFleet(t, 1, haAutoscaler)
	a := f.manager()
	a.waitRole(30*time.Second, "leader")
	b := f.manager()
	b.waitRole(30*time.Second, "standby")
	a.waitJobs(time.Minute, a.submit("--", "echo warm up"))

	const pause = 30 * time.Second
	a.cmd.Process.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
	defer resume()
	type answer struct {
		out, errOut string
		code        int
	}
	got := make(chan answer, 1)
	go func() {
		out, errOut, code := b.berth("submit", "--", "echo submitted during the pause")
		got <- answer{out, errOut, code}
	}()
	var ans answer
	select {
	case ans = <-got:
	case <-time.After(pause - time.Since(stopped)):
		t.Fatalf("a submit through the standby was not answered within the leader's %s pause (issue 32): the standby holds the forward to a frozen leader", pause)
	}
	answeredIn := time.Since(stopped)
	if ans.code != 0 {
		t.Fatalf("submit through the standby during the pause: exit %d\n%s%s", ans.code, ans.out, ans.errOut)
	}
	id := strings.TrimSpace(ans.out)
	t.Logf("submit through the standby answered %v after the SIGSTOP (job %s)", answeredIn.Round(10*time.Millisecond), id)
	b.waitRole(10*time.Second, "leader")
	time.Sleep(time.Until(stopped.Add(pause)))
	resume()
	a.waitRole(20*time.Second, "standby")
	time.Sleep(3 * time.Second) // the resumed old leader reads the request it was sent

	b.waitJobs(time.Minute, id)
	// The warm-up job and this one: any other is the submit applied twice.
	jobs, err := b.client().Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		out, _, _ := b.berth("jobs")
		t.Errorf("the submit sent once during the pause made %d jobs, want 1:\n%s", len(jobs)-1, out)
	}
}
