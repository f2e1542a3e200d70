package gitlab

import (
	"context"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

// Jobs handed to a berth that died before they ended (its Source dropped
// without Finish, as kill -9 drops it) are failed on GitLab by the next
// process's first Request; a job that finished is not touched again.
func TestJobsLostAtARestartAreFailedOnGitLab(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	dir := t.TempDir()
	ledger := func(c *Config) { c.Ledger = NewDirLedger(dir, nil) }
	lostID := f.AddJob(gitlabfake.JobSpec{Script: []string{"sleep 100"}})
	doneID := f.AddJob(gitlabfake.JobSpec{Script: []string{"true"}})
	first := newTestSource(t, f, ledger)
	lost := takeJob(t, first)
	done := takeJob(t, first)
	if err := done.Finish(testCtx(t), jobsource.Result{}); err != nil {
		t.Fatal(err)
	}
	lost.Log().Write([]byte("output sent before the crash\n"))
	lost.stopLoop() // the process dies: no more keep-alives, no Finish

	if st := f.Job(lostID).State(); st != gitlabfake.StateRunning {
		t.Fatalf("the lost job is %s on GitLab before the restart", st)
	}
	second := newTestSource(t, f, ledger)
	if _, err := second.Request(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if st := f.Job(lostID).State(); st != gitlabfake.StateFailed {
		t.Errorf("the job lost at the restart is %s on GitLab, want failed", st)
	}
	if st := f.Job(doneID).ReportedState(); st != gitlabfake.StateSuccess {
		t.Errorf("the finished job's state on GitLab: %s", st)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("%d jobs left in the ledger after the restart", len(ents))
	}
}

// Two processes in turn on one state dir: the second lists what the first
// left, never its own jobs, even those it added before the listing.
func TestDirLedgerListsOnlyAnEarlierProcesssJobs(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	first := NewDirLedger(dir, nil)
	for _, id := range []int64{1, 2} {
		if err := first.Add(ctx, LedgerEntry{ID: id, Token: "token-1"}); err != nil {
			t.Fatal(err)
		}
	}
	first.Remove(ctx, 2) // finished before the crash
	if left, _ := first.Abandoned(ctx); len(left) != 0 {
		t.Errorf("the first process lists its own jobs as abandoned: %v", left)
	}

	second := NewDirLedger(dir, nil)
	if err := second.Add(ctx, LedgerEntry{ID: 3, Token: "token-3"}); err != nil {
		t.Fatal(err)
	}
	left, err := second.Abandoned(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].ID != 1 || left[0].Token != "token-1" {
		t.Errorf("the second process lists %+v, want only job 1 of the first", left)
	}
}

// allLedger lists every job it holds as abandoned, as the etcd ledger of a
// manager that leads again lists those of its earlier term.
type allLedger struct {
	mu   sync.Mutex
	jobs map[int64]LedgerEntry
}

func (l *allLedger) Add(_ context.Context, e LedgerEntry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.jobs[e.ID] = e
	return nil
}

func (l *allLedger) Remove(_ context.Context, id int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.jobs, id)
	return nil
}

func (l *allLedger) Abandoned(context.Context) ([]LedgerEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Collect(maps.Values(l.jobs)), nil
}

// A sweep leaves alone the jobs this process still runs, even when the
// ledger lists them (a manager leading again with jobs of its earlier term
// running): their own Finish tells GitLab.
func TestSweepLeavesTheJobsThisProcessRuns(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	ledger := &allLedger{jobs: map[int64]LedgerEntry{}}
	id := f.AddJob(gitlabfake.JobSpec{Script: []string{"sleep 100"}})
	src := newTestSource(t, f, func(c *Config) { c.Ledger = ledger })
	j := takeJob(t, src)

	if n, err := src.FailAbandoned(testCtx(t)); n != 0 || err != nil {
		t.Errorf("the sweep ended %d jobs (%v), want none", n, err)
	}
	if st := f.Job(id).State(); st != gitlabfake.StateRunning {
		t.Fatalf("the job this process runs is %s on GitLab after the sweep", st)
	}
	if err := j.Finish(testCtx(t), jobsource.Result{}); err != nil {
		t.Fatal(err)
	}
	if st := f.Job(id).ReportedState(); st != gitlabfake.StateSuccess {
		t.Errorf("the job's state on GitLab: %s, want success", st)
	}
	if left, _ := ledger.Abandoned(testCtx(t)); len(left) != 0 {
		t.Errorf("the finished job stays in the ledger: %v", left)
	}
}

// GitLab down during a sweep: the sweep says jobs remain and keeps them in
// the ledger, so that the next sweep tells GitLab.
func TestSweepWhileGitLabIsDownKeepsTheJobs(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	ledger := &allLedger{jobs: map[int64]LedgerEntry{7: {ID: 7, Token: "token-7"}}}
	src := newTestSource(t, f, func(c *Config) { c.Ledger = ledger })
	f.Close()

	if n, err := src.FailAbandoned(testCtx(t)); n != 0 || err == nil {
		t.Errorf("the sweep with GitLab down: %d ended, err %v; want none ended and an error", n, err)
	}
	if left, _ := ledger.Abandoned(testCtx(t)); len(left) != 1 {
		t.Errorf("the ledger holds %v after the failed sweep, want job 7", left)
	}
}
