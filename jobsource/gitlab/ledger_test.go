package gitlab

import (
	"os"
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
	ledger := func(c *Config) { c.LedgerDir = dir }
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
