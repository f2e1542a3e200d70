package gitlab

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-ci/berth/cache"
	"github.com/berth-ci/berth/internal/gitlabfake"
)

// Two GitLab servers in one berth share a cache store, and both have a
// project 7 with cache key "deps": neither gets the other's cache (issue
// 42: project 7 on server B pulled what project 7 on server A pushed). A
// source made again for server A (a restart) finds A's.
func TestCacheKeysNameTheServer(t *testing.T) {
	st, err := cache.NewLocal(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	job := func(f *gitlabfake.Fake, script string) string {
		t.Helper()
		id := f.AddJob(gitlabfake.JobSpec{ProjectID: 7, Variables: noGit, Script: []string{script},
			Cache: []gitlabfake.Cache{{Key: "deps", Paths: []string{"c/"}}}})
		if res, _ := runStaged(t, takeJob(t, stagedSource(t, f, st))); res.Failure != "" {
			t.Fatalf("result %+v:\n%s", res, f.Job(id).Trace())
		}
		return f.Job(id).Trace()
	}
	a, b := newFake(t, gitlabfake.Options{}), newFake(t, gitlabfake.Options{})
	job(a, "mkdir -p c && echo from-A > c/x")
	if tr := job(b, "cat c/x 2>/dev/null || echo no-cache-here"); !strings.Contains(tr, "no-cache-here") || strings.Contains(tr, "from-A") {
		t.Errorf("server B's project 7 got server A's cache:\n%s", tr)
	}
	if tr := job(a, "cat c/x"); !strings.Contains(tr, "from-A") {
		t.Errorf("server A's project 7 lost its cache to a new source:\n%s", tr)
	}
	if _, err := st.Get(context.Background(), "project/7/deps"); err == nil {
		t.Error("a cache was stored under the key that names no server")
	}
}

func TestServerName(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"https://GitLab.example.com", "gitlab.example.com"},
		{"https://gitlab.example.com:443/", "gitlab.example.com"},
		{"http://gitlab.example.com:80", "gitlab.example.com"},
		{"https://gitlab.example.com:8443", "gitlab.example.com:8443"},
		{"https://example.com/gitlab", "example.com/gitlab"},
	} {
		if got := serverName(c.url); got != c.want {
			t.Errorf("serverName(%q) = %q, want %q", c.url, got, c.want)
		}
	}
}
