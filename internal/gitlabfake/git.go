package gitlabfake

import (
	"net/http"
	"net/http/cgi"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// GitLab serves a project's repository over git's smart HTTP protocol
// and, for a job, accepts the user gitlab-ci-token with the job's token
// while the job runs (GitLab's doc/ci/jobs/ci_job_token.md: "The job
// token ... is valid only while the job is running"); anything else is a
// 401 with a Basic challenge, which makes git ask for a username (and
// fail with "could not read Username" when it cannot ask). The fake does
// the same with git-http-backend, for repositories made with Repo.

// gitRepos maps a served repository's name to its directory.
type gitRepos struct {
	mu   sync.Mutex
	dirs map[string]string
}

// HTTPRepo serves the repository at fileURL (a file:// URL from Repo) and
// returns its http URL on the fake, to use as a job's RepoURL. The fake
// then sends the URL with gitlab-ci-token:JOBTOKEN@ in repo_url, as
// GitLab does.
func (f *Fake) HTTPRepo(fileURL string) string {
	dir := strings.TrimPrefix(fileURL, "file://")
	name := filepath.Base(dir)
	f.git.mu.Lock()
	defer f.git.mu.Unlock()
	if f.git.dirs == nil {
		f.git.dirs = map[string]string{}
	}
	f.git.dirs[name] = dir
	return f.URL() + "/git/" + name + ".git"
}

// handleGit serves GET/POST /git/NAME.git/... to git clients that give
// the token of a running job.
func (f *Fake) handleGit(w http.ResponseWriter, r *http.Request) {
	name, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/git/"), "/")
	name = strings.TrimSuffix(name, ".git")
	f.git.mu.Lock()
	dir, ok := f.git.dirs[name]
	f.git.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	user, pass, _ := r.BasicAuth()
	if user != "gitlab-ci-token" || !f.runningJobToken(pass) {
		w.Header().Set("WWW-Authenticate", `Basic realm="GitLab"`)
		http.Error(w, "HTTP Basic: Access denied", http.StatusUnauthorized)
		return
	}
	backend, err := exec.LookPath("git")
	if err != nil {
		http.Error(w, "git is not installed", http.StatusInternalServerError)
		return
	}
	h := &cgi.Handler{
		Path: backend,
		Args: []string{"http-backend"},
		Root: "/git",
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(dir), "GIT_HTTP_EXPORT_ALL=1",
			// The repository is another user's when the test runs as root
			// and git checks ownership.
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*"},
	}
	// The repository is served under its directory's name.
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/git/" + name + strings.TrimPrefix(r.URL.Path, "/git/"+name+".git")
	h.ServeHTTP(w, r2)
}

// runningJobToken reports whether token is the job token of a job that
// runs (or is being canceled: its after_script still runs).
func (f *Fake) runningJobToken(token string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		if j.token == token && (j.state == StateRunning || j.state == StateCanceling) {
			return true
		}
	}
	return false
}
