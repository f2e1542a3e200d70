package gitlab

import (
	"strings"
	"testing"

	"github.com/berth-ci/berth/internal/gitlabfake"
)

// A job without image: runs in the source's image, as in gitlab-runner's
// docker executors ([runners.docker] image), and sees it as CI_JOB_IMAGE;
// a job's own image wins.
func TestDefaultImage(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	s := newTestSource(t, f, func(c *Config) { c.DefaultImage = "registry.example.com/base:1" })
	f.AddJob(gitlabfake.JobSpec{Variables: noGit, Script: []string{"true"}})
	j := takeJob(t, s)
	if im := j.Spec().Image; im == nil || im.Name != "registry.example.com/base:1" || lastValue(j.vars, "CI_JOB_IMAGE") != im.Name {
		t.Errorf("job without image: image %+v, CI_JOB_IMAGE %q", im, lastValue(j.vars, "CI_JOB_IMAGE"))
	}
	f.AddJob(gitlabfake.JobSpec{Variables: noGit, Script: []string{"true"}, Image: "own:2"})
	if im := takeJob(t, s).Spec().Image; im == nil || im.Name != "own:2" {
		t.Errorf("job with image own:2 runs in %+v", im)
	}
}

// With allowed_images set, a job that would run in the instance's shell
// is refused before anything runs (leaving image: out must not bypass
// the list), saying how to fix it.
func TestShellJobRefusedUnderAllowedImages(t *testing.T) {
	f := newFake(t, gitlabfake.Options{})
	s := stagedSource(t, f, nil)
	st := s.Settings()
	st.RefuseShellJobs = true
	s.SetSettings(st)
	id := f.AddJob(gitlabfake.JobSpec{Variables: noGit, Script: []string{"echo script-ran"}})
	_, out := runStaged(t, takeJob(t, s))
	tr := f.Job(id).Trace()
	if f.Job(id).FailureReason() != "runner_configuration_error" || strings.Contains(out, "script-ran") ||
		!strings.Contains(tr, "allow_shell_jobs") || !strings.Contains(tr, "allowed_images") {
		t.Errorf("reason %q, output %q, trace:\n%s", f.Job(id).FailureReason(), out, tr)
	}
}
