package gitlab

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-ci/berth/cache"
	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

// localFiles is jobsource.Files on this machine's sh: the scripts the job
// sends an instance run here for real.
type localFiles struct{}

func (localFiles) Stream(ctx context.Context, script string, stdin io.Reader, stdout io.Writer) (int, string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	if stdin == nil {
		stdin = bytes.NewReader(nil)
	}
	if stdout == nil {
		stdout = io.Discard
	}
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stderr.String(), nil
	}
	if err != nil {
		return -1, stderr.String(), err
	}
	return 0, stderr.String(), nil
}

// runStaged is the manager's flow for a staged job: Prepare, the script
// (only if Prepare worked), after_script, Collect, Finish.
func runStaged(t *testing.T, j *Job) (jobsource.Result, string) {
	t.Helper()
	ctx := testCtx(t)
	tmp := t.TempDir()
	var out bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { out.Write(p); return j.Log().Write(p) })
	j.Started("test-instance")
	res := jobsource.Result{ExitCode: 0}
	if err := j.Prepare(ctx, localFiles{}); err != nil {
		res = jobsource.Result{ExitCode: -1, Failure: jobsource.FailureSystem, Message: err.Error()}
	} else if code, _ := (driver{t: t}).sh(j.Spec().Script, tmp, w, nil, nil); code != 0 {
		res = jobsource.Result{ExitCode: code, Failure: jobsource.FailureScript}
	}
	(driver{t: t}).sh(j.Spec().AfterScript, tmp, w, nil, nil)
	res = j.Collect(ctx, localFiles{}, res)
	if err := j.Finish(ctx, res); err != nil {
		t.Fatal(err)
	}
	return res, out.String()
}

func artifactJob(extra func(*gitlabfake.JobSpec)) gitlabfake.JobSpec {
	s := gitlabfake.JobSpec{Variables: noGit, Script: []string{"echo script-ran", "mkdir -p out", "echo data > out/file.txt"},
		Artifacts: []gitlabfake.Artifact{{Paths: []string{"out/"}}}}
	if extra != nil {
		extra(&s)
	}
	return s
}

func stagedSource(t *testing.T, f *gitlabfake.Fake, st cache.Store) *Source {
	return newTestSource(t, f, func(c *Config) { c.ArtifactRetryDelay = 5 * time.Millisecond; c.Cache = st })
}

// A 413 is the job's doing (it made more than GitLab keeps): the job fails
// as script_failure, which retry: when: runner_system_failure leaves
// alone, with the archive's size and where GitLab's limit is set.
func TestArtifactTooLargeIsAScriptFailure(t *testing.T) {
	f := newFake(t, gitlabfake.Options{MaxArtifactSize: 10})
	id := f.AddJob(artifactJob(nil))
	res, _ := runStaged(t, takeJob(t, stagedSource(t, f, nil)))
	if res.Failure != jobsource.FailureScript || !strings.Contains(res.Message, "413") {
		t.Fatalf("result %+v, want a script failure naming the 413", res)
	}
	if n := f.Count(gitlabfake.EndpointArtifacts, http.StatusRequestEntityTooLarge); n != 1 {
		t.Errorf("%d uploads answered 413, want 1 (no retry)", n)
	}
	tr := f.Job(id).Trace()
	for _, want := range []string{"413 Request Entity Too Large", "the archive (", "Maximum artifacts size"} {
		if !strings.Contains(tr, want) {
			t.Errorf("trace lacks %q:\n%s", want, tr)
		}
	}
	if strings.Contains(tr, "retry the job") || f.Job(id).FailureReason() != "script_failure" {
		t.Errorf("job %s (%s), trace:\n%s", f.Job(id).ReportedState(), f.Job(id).FailureReason(), tr)
	}
}

// max_artifact_size stops the packing before anything reaches GitLab.
func TestArtifactOverMaxArtifactSizeIsAScriptFailure(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	id := f.AddJob(artifactJob(func(s *gitlabfake.JobSpec) {
		s.Script = append(s.Script, "head -c 200000 /dev/urandom > out/big")
	}))
	src := newTestSource(t, f, func(c *Config) { c.MaxArtifactSize = 64 << 10; c.TempDir = t.TempDir() })
	res, _ := runStaged(t, takeJob(t, src))
	if res.Failure != jobsource.FailureScript || f.Job(id).FailureReason() != "script_failure" {
		t.Fatalf("result %+v, reason %q, want a script failure", res, f.Job(id).FailureReason())
	}
	if n := f.Count(gitlabfake.EndpointArtifacts, 0); n != 0 {
		t.Errorf("%d uploads, want none", n)
	}
	if tr := f.Job(id).Trace(); !strings.Contains(tr, "larger than this runner's max_artifact_size of 64.0 KiB") {
		t.Errorf("trace:\n%s", tr)
	}
}

func TestArtifactUploadRetriesThenSucceeds(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	f.FailNextArtifactUploads(http.StatusServiceUnavailable, 2)
	id := f.AddJob(artifactJob(nil))
	res, _ := runStaged(t, takeJob(t, stagedSource(t, f, nil)))
	if res.Failure != jobsource.FailureNone {
		t.Fatalf("result %+v:\n%s", res, f.Job(id).Trace())
	}
	if n := len(f.Job(id).Artifacts()); n != 1 {
		t.Errorf("%d archives stored", n)
	}
	if tr := f.Job(id).Trace(); strings.Count(tr, "retrying in") != 2 {
		t.Errorf("want two retries in the trace:\n%s", tr)
	}
}

func TestArtifactUploadForbiddenFails(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	f.FailNextArtifactUploads(http.StatusForbidden, 1)
	id := f.AddJob(artifactJob(nil))
	res, _ := runStaged(t, takeJob(t, stagedSource(t, f, nil)))
	if res.Failure == jobsource.FailureNone || !strings.Contains(res.Message, "403") {
		t.Fatalf("result %+v", res)
	}
	if n := f.Count(gitlabfake.EndpointArtifacts, 0); n != 1 {
		t.Errorf("%d uploads, want 1 (403 is not retried)", n)
	}
	_ = id
}

func TestEscapingArtifactPathRefusedBeforeTheScript(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	f.AddJob(artifactJob(func(s *gitlabfake.JobSpec) { s.Artifacts[0].Paths = []string{"../../../etc/passwd"} }))
	res, out := runStaged(t, takeJob(t, stagedSource(t, f, nil)))
	if res.Failure != jobsource.FailureSystem || !strings.Contains(res.Message, "escapes the build directory") {
		t.Fatalf("result %+v", res)
	}
	if strings.Contains(out, "script-ran") {
		t.Error("the script ran although its artifacts were refused")
	}
	if n := f.Count(gitlabfake.EndpointArtifacts, 0); n != 0 {
		t.Errorf("%d uploads", n)
	}
}

func TestCorruptCacheIgnored(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	st, err := cache.NewLocal(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := "gitlab/" + serverName(f.URL()) + "/project/0/k"
	if err := st.Put(context.Background(), key, strings.NewReader("this is not a zip")); err != nil {
		t.Fatal(err)
	}
	id := f.AddJob(gitlabfake.JobSpec{Variables: noGit, Script: []string{"mkdir -p c", "echo new > c/x"},
		Cache: []gitlabfake.Cache{{Key: "k", Paths: []string{"c/"}}}})
	res, _ := runStaged(t, takeJob(t, stagedSource(t, f, st)))
	tr := f.Job(id).Trace()
	if res.Failure != jobsource.FailureNone || !strings.Contains(tr, "unusable and is ignored") {
		t.Fatalf("result %+v, trace:\n%s", res, tr)
	}
	// The job saved a sound cache over the corrupt one.
	rc, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.HasPrefix(b, []byte("PK")) {
		t.Errorf("cache after the job is %q, want a zip", b[:min(len(b), 20)])
	}
}

func TestBuildDirRemovedAfterCollect(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	f.AddJob(artifactJob(nil))
	s := stagedSource(t, f, nil)
	j := takeJob(t, s)
	runStaged(t, j)
	if _, err := os.Stat(filepath.Join(s.cfg.BuildsDir, j.ID())); !os.IsNotExist(err) {
		t.Errorf("build dir still there after the job: %v", err)
	}
}

// As in gitlab-runner, the sources are checked out first and the
// dependencies' artifacts laid over them: an artifact wins over a tracked
// file of the same path.
func TestDependencyArtifactsOverTheCheckout(t *testing.T) {
	repo, sha := gitRepo(t)
	f := newFake(t, gitlabfake.Options{})
	s := stagedSource(t, f, nil)
	build := f.AddJob(gitlabfake.JobSpec{Name: "build", Variables: noGit,
		Script:    []string{"echo from-the-artifact > README", "mkdir -p out", "echo built > out/x"},
		Artifacts: []gitlabfake.Artifact{{Paths: []string{"README", "out/"}}}})
	if res, _ := runStaged(t, takeJob(t, s)); res.Failure != jobsource.FailureNone {
		t.Fatalf("build: %+v\n%s", res, f.Job(build).Trace())
	}
	test := f.AddJob(gitlabfake.JobSpec{Name: "test", RepoURL: repo, Sha: sha, Dependencies: []int64{build},
		Refspecs: []string{"+refs/heads/main:refs/remotes/origin/main"},
		Script:   []string{"cat README", "cat out/x", "git rev-parse HEAD"}})
	res, out := runStaged(t, takeJob(t, s))
	if res.Failure != jobsource.FailureNone {
		t.Fatalf("test: %+v\n%s", res, f.Job(test).Trace())
	}
	if !strings.Contains(out, "from-the-artifact") || strings.Contains(out, "hello from the repo") || !strings.Contains(out, "built") || !strings.Contains(out, sha) {
		t.Errorf("stage 2 output:\n%s", out)
	}
	ents, _ := os.ReadDir(s.cfg.BuildsDir)
	if len(ents) != 0 {
		t.Errorf("builds dir keeps %v after the jobs", ents)
	}
}
