package gitlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/berth-ci/berth/artifacts"
	"github.com/berth-ci/berth/cache"
	"github.com/berth-ci/berth/jobsource"
)

// Caches (cache:) are kept by berth (package cache), per project and key, so
// they survive the instance: with max_use_count = 1 every job runs on a
// fresh one. A cache is a convenience: nothing about it fails a job.

// cacheKeys returns the storage keys to try for c, the key first then its
// fallback_keys and CACHE_FALLBACK_KEY, all expanded when the job arrived
// (expand.go).
func (j *Job) cacheKeys(c jobCache, withFallbacks bool) []string {
	keys := []string{c.Key}
	if withFallbacks {
		keys = append(keys, c.FallbackKeys...)
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if k == "" {
			k = "default"
		}
		out = append(out, k)
	}
	return out
}

// storeKey is where c's archive for key lives in the store:
// gitlab/<server>/project/<id>/<key>. Project IDs are per GitLab server, so
// the server is part of the key: two servers in one berth (or sharing one
// S3 bucket) must not hand each other's project 7 its cache. The server is
// the source's configured URL (serverName), not CI_SERVER_URL, which a
// project's own variables may override. Caches of berth before this key
// (project/<id>/<key>) are not read again and age out of the store.
func (j *Job) storeKey(key string) string {
	return "gitlab/" + j.src.server + "/project/" + strconv.FormatInt(j.p.JobInfo.ProjectID, 10) + "/" + key
}

// serverName names a GitLab server the same way whatever spelling of its
// URL berth.toml uses: host in lower case, without the scheme's default
// port, with the path of a GitLab under a relative URL. It stays the same
// across restarts; changing url to another host name starts new caches.
func serverName(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL // withDefaults has checked it; never here
	}
	host := strings.ToLower(u.Hostname())
	if p := u.Port(); p != "" && !(u.Scheme == "https" && p == "443") && !(u.Scheme == "http" && p == "80") {
		host = net.JoinHostPort(host, p)
	}
	return host + strings.TrimSuffix(u.EscapedPath(), "/")
}

// restoreCache extracts the first of c's keys that has a sound archive.
func (j *Job) restoreCache(ctx context.Context, f jobsource.Files, c jobCache, project string) {
	if c.Policy == "push" {
		return
	}
	st := j.src.cfg.Cache
	if st == nil {
		j.writeLine("WARNING: cache: is not kept by this berth (no cache store); the job runs without it")
		return
	}
	for _, key := range j.cacheKeys(c, true) {
		j.writeLine(fmt.Sprintf("Checking cache for %s...", key))
		err := j.extractCache(ctx, f, st, key, project)
		for attempt := 2; attempt <= j.git.attempts.cache && err != nil && !errors.Is(err, cache.ErrNotFound) && ctx.Err() == nil; attempt++ {
			j.writeLine(fmt.Sprintf("WARNING: restoring the cache for %s failed: %v; trying again (attempt %d of %d, RESTORE_CACHE_ATTEMPTS)", key, err, attempt, j.git.attempts.cache))
			err = j.extractCache(ctx, f, st, key, project)
		}
		switch {
		case err == nil:
			j.writeLine("Successfully extracted cache")
			return
		case errors.Is(err, cache.ErrNotFound):
			j.writeLine(fmt.Sprintf("WARNING: no cache for key %s", key))
		case errors.Is(err, artifacts.ErrCorrupt) || errors.Is(err, artifacts.ErrEscapes):
			j.writeLine(fmt.Sprintf("WARNING: the cache archive for %s is unusable and is ignored: %v", key, err))
			j.log.Warn("corrupt cache archive ignored", "key", key, "err", err)
		default:
			j.writeLine(fmt.Sprintf("WARNING: restoring the cache for %s failed and is skipped: %v", key, err))
		}
	}
}

func (j *Job) extractCache(ctx context.Context, f jobsource.Files, st cache.Store, key, project string) error {
	rc, err := st.Get(ctx, j.storeKey(key))
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(j.src.cfg.TempDir, "berth-cache-*.zip")
	if err != nil {
		return err
	}
	os.Remove(tmp.Name())
	defer tmp.Close()
	n, err := io.Copy(tmp, rc)
	if err != nil {
		return err
	}
	_, err = artifacts.Unpack(ctx, shell{f}, project, tmp, n)
	return err
}

// saveCache archives c's paths under its key.
func (j *Job) saveCache(ctx context.Context, f jobsource.Files, c jobCache, project string) {
	if c.Policy == "pull" {
		return
	}
	st := j.src.cfg.Cache
	if st == nil {
		return
	}
	key := j.cacheKeys(c, false)[0]
	j.writeLine(fmt.Sprintf("Creating cache %s...", key))
	paths, err := artifacts.Pick(ctx, shell{f}, project, artifacts.Spec{Paths: c.Paths, Untracked: c.Untracked})
	if err != nil {
		j.writeLine("WARNING: cache not saved: " + err.Error())
		return
	}
	if len(paths) == 0 {
		j.writeLine("WARNING: no files match the cache paths; cache not saved")
		return
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := artifacts.Pack(ctx, shell{f}, project, paths, artifacts.Zip, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	perr := st.Put(ctx, j.storeKey(key), pr)
	pr.CloseWithError(perr)
	if err := <-done; err != nil && perr == nil {
		perr = err
	}
	if perr != nil {
		j.writeLine("WARNING: cache not saved: " + perr.Error())
		return
	}
	j.writeLine(fmt.Sprintf("Created cache %s (%d files and directories)", key, len(paths)))
}
