package aws

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/fleet"
	"github.com/berth-ci/berth/internal/awsfake"
	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/jobsource/gitlab"
	"github.com/berth-ci/berth/policy"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/scaler"
	"github.com/berth-ci/berth/store"
)

// sshFiles is jobsource.Files over berth's SSH connection to an instance,
// as the manager's.
type sshFiles struct{ ci provider.ConnectInfo }

func (f sshFiles) Stream(ctx context.Context, script string, stdin io.Reader, stdout io.Writer) (int, string, error) {
	var r executor.Runner
	return r.Stream(ctx, f.ci, script, stdin, stdout)
}

// A GitLab pipeline on SSH instances of the AWS provider (issue 30): berth
// fetches the sources on the instance with its git, into the default
// builds dir (builds/ in the login's home, resolved there), the script
// finds them at CI_PROJECT_DIR, and the artifacts and the dotenv report it
// leaves there reach the next job on another instance.
func TestGitLabPipelineOnSSHInstances(t *testing.T) {
	repo, sha := gitlabfake.Repo(t)
	cloud, key := fakeAWS(t, awsfake.Options{MaxSize: 2, BootTime: 100 * time.Millisecond, TerminateTime: 50 * time.Millisecond})
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, _ := newGroup(t, cloud, key, nil)
	f, stop := runFleet(t, scaler.New(scaler.Config{MaxInstances: 2, MaxUseCount: 1, Policies: scaler.FixedPolicy(policy.Policy{})}, time.Now()), g, st)
	defer stop()

	gl := gitlabfake.New(gitlabfake.Options{})
	defer gl.Close()
	src, err := gitlab.New(gitlab.Config{URL: gl.URL(), Token: gl.Token(), Version: "test", UpdateInterval: 20 * time.Millisecond,
		KeepAliveInterval: 100 * time.Millisecond, ArtifactRetryDelay: 5 * time.Millisecond}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	build := gl.AddJob(gitlabfake.JobSpec{Name: "build", RepoURL: repo, Sha: sha, Refspecs: []string{"+refs/heads/main:refs/remotes/origin/main"},
		Script: []string{"cat README", `case "$CI_PROJECT_DIR" in "$HOME"/builds/*) ;; *) exit 9;; esac`,
			"mkdir -p out", "echo built > out/x", "echo TARGET=prod > build.env"},
		Artifacts: []gitlabfake.Artifact{{Paths: []string{"out/"}}, {Type: "dotenv", Format: "gzip", Paths: []string{"build.env"}}}})
	out1, inst1 := runOnInstance(t, f, src, gl, "job-1")
	if !strings.Contains(out1, gitlabfake.Checkout) {
		t.Errorf("build output:\n%s", out1)
	}
	test := gl.AddJob(gitlabfake.JobSpec{Name: "test", RepoURL: repo, Sha: sha, Dependencies: []int64{build},
		Script: []string{"cat out/x", `echo "target=$TARGET"`}})
	out2, inst2 := runOnInstance(t, f, src, gl, "job-2")
	if !strings.Contains(out2, "built") || !strings.Contains(out2, "target=prod") || inst1 == inst2 {
		t.Errorf("test on %s (build on %s):\n%s\n%s", inst2, inst1, out2, gl.Job(test).Trace())
	}
}

// runOnInstance takes the next GitLab job and runs it as the manager does
// on an instance of its own: Prepare, the script, Collect, Finish.
func runOnInstance(t *testing.T, f *fleet.Fleet, src *gitlab.Source, gl *gitlabfake.Fake, key string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.Reserve(key); err != nil {
		t.Fatal(err)
	}
	acq, err := f.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release(key)
	var j jobsource.Job
	for j == nil {
		if j, err = src.Request(ctx); err != nil {
			t.Fatal(err)
		}
	}
	j.Started(acq.Instance)
	var out bytes.Buffer
	res := jobsource.Result{}
	files := sshFiles{acq.Connect}
	if err := j.(jobsource.Stager).Prepare(ctx, files); err != nil {
		t.Fatalf("prepare on %s: %v", acq.Instance, err)
	}
	code, err := executor.Run(ctx, acq.Connect, executor.Command{Script: j.Spec().Script, Output: io.MultiWriter(&out, j.Log())})
	if err != nil || code != 0 {
		res = jobsource.Result{ExitCode: code, Failure: jobsource.FailureScript}
	}
	res = j.(jobsource.Stager).Collect(ctx, files, res)
	if err := j.Finish(ctx, res); err != nil {
		t.Fatal(err)
	}
	if res.Failure != jobsource.FailureNone {
		id, _ := strconv.ParseInt(j.ID(), 10, 64)
		t.Fatalf("job on %s: %+v\n%s", acq.Instance, res, gl.Job(id).Trace())
	}
	return out.String(), acq.Instance
}
