package gitlabfake

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// DockerPipeline is a pipeline written for GitLab's docker executor (issue
// 30): build → test → deploy in an image without git. build checks out the
// sources, leaves artifacts (one expanded path, one excluded dir), a cache
// and a junit, a dotenv and a raw code-quality report; test reads the
// artifacts and the cache; deploy reads the dotenv variable. The manager's
// tests run it on local sandboxes, cmd/berth's through a cloud plugin, so
// that every instance kind is held to the same pipeline.
type DockerPipeline struct {
	Fake *Fake
	// Repo and Sha are a repository whose README says "checked out by
	// berth", and its commit.
	Repo, Sha string
	// Image is the jobs' image: it must have /etc/os-release naming
	// berth-test-image (internal/imagetest's busybox) and no git.
	Image string
	// Variables are given to every job.
	Variables []Variable
}

// Checkout is what the pipeline's README says: a job that prints it had
// its sources.
const Checkout = "checked out by berth"

func (p DockerPipeline) job(name string, script ...string) JobSpec {
	return JobSpec{Name: name, Stage: name, ProjectID: 9, RepoURL: p.Repo, Ref: "main", Sha: p.Sha,
		Image: p.Image, Variables: p.Variables, Script: script}
}

// AddBuild adds the build job and returns its ID.
func (p DockerPipeline) AddBuild() int64 {
	b := p.job("build",
		"grep -q NAME=berth-test-image /etc/os-release", // the script runs in the image
		"! command -v git", // which has no git
		"cat README",       // yet the sources are there
		`test "$PWD" = "$CI_PROJECT_DIR"`,
		"mkdir -p out-$CI_JOB_ID tmp .cache",
		"echo built > out-$CI_JOB_ID/result.txt",
		"echo scratch > tmp/scratch.txt",
		"echo cached > .cache/c.txt",
		`echo '<testsuite name="unit" tests="1"/>' > junit.xml`,
		"echo DEPLOY_TARGET=staging-$CI_JOB_ID > build.env",
		`echo '[{"description":"x","severity":"minor"}]' > gl-code-quality-report.json`,
	)
	b.Artifacts = []Artifact{
		{Name: "bin-$CI_JOB_ID", Paths: []string{"out-$CI_JOB_ID/", "tmp/"}, Exclude: []string{"tmp/**"}},
		{Type: "junit", Format: "gzip", Paths: []string{"junit.xml"}},
		{Type: "dotenv", Format: "gzip", Paths: []string{"build.env"}},
		{Type: "codequality", Format: "raw", Paths: []string{"gl-code-quality-report.json"}},
	}
	b.Cache = []Cache{{Key: "deps", Paths: []string{".cache/"}}}
	return p.Fake.AddJob(b)
}

// BuildProblems says what is wrong with a finished build: its trace and
// what it uploaded, each with its type, format and expanded name.
func (p DockerPipeline) BuildProblems(build int64) []string {
	var bad []string
	tr := p.Fake.Job(build).Trace()
	if !strings.Contains(tr, Checkout) || !strings.Contains(tr, "section_start:") {
		bad = append(bad, "build trace lacks the checkout or the sections:\n"+tr)
	}
	got := map[string]Uploaded{}
	for _, u := range p.Fake.Job(build).Artifacts() {
		got[u.Type] = u
	}
	bid := fmt.Sprint(build)
	want := []struct{ typ, format, name, content string }{
		{"archive", "zip", "bin-" + bid + ".zip", ""},
		{"junit", "gzip", "", "testsuite"},
		{"dotenv", "gzip", "", "DEPLOY_TARGET=staging-" + bid},
		{"codequality", "raw", "gl-code-quality-report.json", `"severity":"minor"`},
	}
	for _, w := range want {
		u := got[w.typ]
		text, err := u.Text()
		if u.Format != w.format || (w.name != "" && u.Filename != w.name) || err != nil || !strings.Contains(text, w.content) {
			bad = append(bad, fmt.Sprintf("%s uploaded as format %q, name %q (%v): %q", w.typ, u.Format, u.Filename, err, text))
		}
	}
	return bad
}

// AddTest adds the test job, which needs build's artifacts and pulls its
// cache, and returns its ID.
func (p DockerPipeline) AddTest(build int64) int64 {
	tj := p.job("test", "cat out-"+fmt.Sprint(build)+"/result.txt", "test ! -e tmp/scratch.txt", "cat .cache/c.txt", "cat README")
	tj.Dependencies = []int64{build}
	tj.Cache = []Cache{{Key: "deps", Paths: []string{".cache/"}, Policy: "pull"}}
	return p.Fake.AddJob(tj)
}

// TestProblems says what is wrong with a finished test job.
func (p DockerPipeline) TestProblems(test int64) []string {
	tr := p.Fake.Job(test).Trace()
	for _, want := range []string{"built", "cached", Checkout} {
		if !strings.Contains(tr, want) {
			return []string{fmt.Sprintf("test trace lacks %q:\n%s", want, tr)}
		}
	}
	return nil
}

// AddDeploy adds the deploy job, which reads build's dotenv variable, and
// returns its ID.
func (p DockerPipeline) AddDeploy(build int64) int64 {
	dj := p.job("deploy", `echo "deploying to $DEPLOY_TARGET"`)
	dj.Dependencies = []int64{build}
	return p.Fake.AddJob(dj)
}

// DeployProblems says what is wrong with a finished deploy job.
func (p DockerPipeline) DeployProblems(build, deploy int64) []string {
	if tr := p.Fake.Job(deploy).Trace(); !strings.Contains(tr, "deploying to staging-"+fmt.Sprint(build)) {
		return []string{"deploy did not read the dotenv variable:\n" + tr}
	}
	return nil
}

// InstanceOf reads the instance a job ran on from its trace, "" if the
// trace names none.
func InstanceOf(trace string) string {
	_, rest, ok := strings.Cut(trace, "Running on instance ")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "\n")
	return id
}

// Text is the upload's content, unzipped when its format is gzip.
func (u Uploaded) Text() (string, error) {
	if u.Format != "gzip" {
		return string(u.Data), nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(u.Data))
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(zr)
	return string(b), err
}

// Repo makes a git repository with one commit on main whose README says
// Checkout, and returns its file:// URL and the commit. It is not under
// /tmp, which a sandbox has its own of, and it is world-readable, as a git
// server's repositories are to their clients: jobs run as a subordinate
// uid when berth is root. Beside it, untracked, jobs.gitconfig trusts it
// for a job whose uid does not own it (give it as GIT_CONFIG_GLOBAL).
func Repo(t testing.TB) (url, sha string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir, err := os.MkdirTemp("/var/tmp", "berth-repo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README", Checkout+"\n")
	git("add", "README")
	git("commit", "-q", "-m", "first")
	write("jobs.gitconfig", "[safe]\n\tdirectory = *\n")
	return "file://" + dir, git("rev-parse", "HEAD")
}
