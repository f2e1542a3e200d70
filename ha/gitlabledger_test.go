package ha

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource/gitlab"
)

// ledger is m's GitLab ledger of runner "r1", fenced by the term m holds.
func (m *manager) ledger(prefix string) *GitLabLedger {
	return NewGitLabLedger(m.cli, prefix, "r1", func() *Fence {
		if m.term == nil {
			return nil
		}
		return m.term.Fence()
	}, quiet())
}

// killLeader ends m's term as a kill -9 does: its lease is revoked (etcd
// expires it when no keepalive comes) and nothing of m runs any more.
func killLeader(t *testing.T, m *manager) {
	t.Helper()
	if _, err := m.cli.Revoke(testCtx(t), clientv3.LeaseID(m.term.Lease())); err != nil {
		t.Fatal(err)
	}
	waitDone(t, m.term)
}

func ids(es []gitlab.LedgerEntry) []int64 {
	var out []int64
	for _, e := range es {
		out = append(out, e.ID)
	}
	slices.Sort(out)
	return out
}

// Leader A records two GitLab jobs, finishes one and is killed. B leads:
// its listing holds A's unfinished job, with what failing it takes, and
// not the job B records itself in its own term.
func TestGitLabJobsOfAnEarlierTermAreAbandoned(t *testing.T) {
	p := newPrefix(t)
	a, b := newManager(t, p, "a"), newManager(t, p, "b")
	a.lead(t)
	la := a.ledger(p)
	for _, id := range []int64{1, 2} {
		if err := la.Add(testCtx(t), gitlab.LedgerEntry{ID: id, Token: fmt.Sprint("token-of-", id), Reason: "runner_system_failure"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := la.Remove(testCtx(t), 2); err != nil {
		t.Fatal(err)
	}
	if left, err := la.Abandoned(testCtx(t)); err != nil || len(left) != 0 {
		t.Fatalf("the leader lists its own term's jobs: %v %v", left, err)
	}
	killLeader(t, a)

	b.lead(t)
	lb := b.ledger(p)
	if err := lb.Add(testCtx(t), gitlab.LedgerEntry{ID: 3, Token: "token-of-3"}); err != nil {
		t.Fatal(err)
	}
	left, err := lb.Abandoned(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].ID != 1 || left[0].Token != "token-of-1" || left[0].Reason != "runner_system_failure" {
		t.Fatalf("the new leader lists %+v, want A's job 1 with its token and reason", left)
	}
	if err := lb.Remove(testCtx(t), 1); err != nil {
		t.Fatal(err)
	}
	if left, _ := lb.Abandoned(testCtx(t)); len(left) != 0 {
		t.Errorf("after the sweep the new leader lists %v", ids(left))
	}
}

// A leader paused past its lease resumes believing it leads: etcd refuses
// its records and removals, so the new leader's listing is what the old
// term left, whatever the old leader does afterwards.
func TestDeposedLeaderCannotChangeTheGitLabLedger(t *testing.T) {
	p := newPrefix(t)
	a, b := newManager(t, p, "a"), newManager(t, p, "b")
	a.lead(t)
	stale := &Fence{Key: a.term.Fence().Key, Rev: a.term.Fence().Rev, Ctx: context.Background()}
	if err := a.ledger(p).Add(testCtx(t), gitlab.LedgerEntry{ID: 1, Token: "t1"}); err != nil {
		t.Fatal(err)
	}
	killLeader(t, a)
	b.lead(t)

	paused := NewGitLabLedger(a.cli, p, "r1", func() *Fence { return stale }, quiet())
	if err := paused.Add(testCtx(t), gitlab.LedgerEntry{ID: 2, Token: "t2"}); !errors.Is(err, ErrFenced) {
		t.Errorf("record by the deposed leader: %v, want ErrFenced", err)
	}
	if err := paused.Remove(testCtx(t), 1); !errors.Is(err, ErrFenced) {
		t.Errorf("removal by the deposed leader: %v, want ErrFenced", err)
	}
	// A that noticed its term ended does not even ask etcd.
	if err := a.ledger(p).Add(testCtx(t), gitlab.LedgerEntry{ID: 2, Token: "t2"}); !errors.Is(err, ErrNotLeader) {
		t.Errorf("record after the term ended: %v, want ErrNotLeader", err)
	}
	left, err := b.ledger(p).Abandoned(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(left); !slices.Equal(got, []int64{1}) {
		t.Errorf("the new leader lists jobs %v, want [1]", got)
	}
}

// A standby neither records nor lists: only the leader sweeps.
func TestStandbyHasNoGitLabLedger(t *testing.T) {
	p := newPrefix(t)
	m := newManager(t, p, "a")
	l := m.ledger(p)
	if err := l.Add(testCtx(t), gitlab.LedgerEntry{ID: 1, Token: "t"}); !errors.Is(err, ErrNotLeader) {
		t.Errorf("record by a standby: %v, want ErrNotLeader", err)
	}
	if _, err := l.Abandoned(testCtx(t)); !errors.Is(err, ErrNotLeader) {
		t.Errorf("listing by a standby: %v, want ErrNotLeader", err)
	}
}

// The whole path with GitLab's runner API: leader A's GitLab source takes
// a job and A is killed; B's source, sweeping at the start of B's term,
// fails it on GitLab with A's job token, and the ledger is empty after.
func TestNewLeaderFailsTheJobsOfAKilledLeaderOnGitLab(t *testing.T) {
	fake := gitlabfake.New(gitlabfake.Options{})
	t.Cleanup(fake.Close)
	id := fake.AddJob(gitlabfake.JobSpec{Script: []string{"sleep 100"}})
	p := newPrefix(t)
	a, b := newManager(t, p, "a"), newManager(t, p, "b")
	a.lead(t)
	srcA := gitlabSource(t, fake, a.ledger(p))
	if j, err := srcA.Request(testCtx(t)); err != nil || j == nil {
		t.Fatalf("leader A took no job: %v", err)
	}
	killLeader(t, a) // and srcA with it: no keep-alive, no Finish

	b.lead(t)
	srcB := gitlabSource(t, fake, b.ledger(p))
	if n, err := srcB.FailAbandoned(testCtx(t)); n != 1 || err != nil {
		t.Errorf("the new leader's sweep ended %d jobs (%v), want 1", n, err)
	}
	if st := fake.Job(id).State(); st != gitlabfake.StateFailed {
		t.Errorf("the killed leader's job is %s on GitLab, want failed", st)
	}
	if r := fake.Job(id).FailureReason(); r != "runner_system_failure" {
		t.Errorf("failure reason %q, want runner_system_failure", r)
	}
	if left, _ := b.ledger(p).Abandoned(testCtx(t)); len(left) != 0 {
		t.Errorf("jobs left in the ledger after the sweep: %v", ids(left))
	}
}

func gitlabSource(t *testing.T, fake *gitlabfake.Fake, l gitlab.Ledger) *gitlab.Source {
	t.Helper()
	s, err := gitlab.New(gitlab.Config{URL: fake.URL(), Token: fake.Token(), Ledger: l,
		KeepAliveInterval: time.Hour, BuildsDir: t.TempDir()}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
