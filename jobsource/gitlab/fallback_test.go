package gitlab

import (
	"strings"
	"testing"

	"github.com/berth-ci/berth/cache"
	"github.com/berth-ci/berth/internal/gitlabfake"
	"github.com/berth-ci/berth/jobsource"
)

// GitLab keeps protected branches' caches under keys ending in
// -protected. A CACHE_FALLBACK_KEY naming one (directly or through a
// variable) would let an unprotected branch restore it: it is refused with
// a warning in the trace, as gitlab-runner does, and the job goes on
// without it. An ordinary fallback key still works.
func TestProtectedCacheFallbackRefused(t *testing.T) {
	st, err := cache.NewLocal(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(t, gitlabfake.Options{})
	s := stagedSource(t, f, st)
	seed := f.AddJob(gitlabfake.JobSpec{Variables: noGit, Script: []string{"mkdir -p c", "echo from-protected > c/x"},
		Cache: []gitlabfake.Cache{{Key: "main-protected", Paths: []string{"c/"}}}})
	if res, _ := runStaged(t, takeJob(t, s)); res.Failure != jobsource.FailureNone {
		t.Fatalf("seeding the protected cache: %+v\n%s", res, f.Job(seed).Trace())
	}
	for _, fallback := range []string{"main-protected", "$BRANCH-protected. "} {
		id := f.AddJob(gitlabfake.JobSpec{Variables: append([]gitlabfake.Variable{{Key: "BRANCH", Value: "main"},
			{Key: "CACHE_FALLBACK_KEY", Value: fallback}}, noGit...),
			Script: []string{"test ! -e c/x"},
			Cache:  []gitlabfake.Cache{{Key: "feature-non_protected", Paths: []string{"c/"}, Policy: "pull"}}})
		res, _ := runStaged(t, takeJob(t, s))
		tr := f.Job(id).Trace()
		if res.Failure != jobsource.FailureNone || !strings.Contains(tr, `WARNING: CACHE_FALLBACK_KEY "main-protected`) ||
			!strings.Contains(tr, `not allowed to end in "-protected"`) || strings.Contains(tr, "Checking cache for main-protected") {
			t.Errorf("fallback %q: %+v\n%s", fallback, res, tr)
		}
	}
	id := f.AddJob(gitlabfake.JobSpec{Variables: append([]gitlabfake.Variable{{Key: "CACHE_FALLBACK_KEY", Value: "main"}}, noGit...),
		Script: []string{"true"}, Cache: []gitlabfake.Cache{{Key: "feature", Paths: []string{"c/"}, Policy: "pull"}}})
	runStaged(t, takeJob(t, s))
	if tr := f.Job(id).Trace(); !strings.Contains(tr, "Checking cache for main...") || strings.Contains(tr, "not allowed") {
		t.Errorf("an ordinary fallback key:\n%s", tr)
	}
}
