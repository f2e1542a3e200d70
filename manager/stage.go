package manager

import (
	"context"
	"io"
	"path/filepath"
	"time"

	"github.com/berth-ci/berth/cache"
	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/fleet"
	"github.com/berth-ci/berth/jobsource"
	"github.com/berth-ci/berth/provider"
)

// instanceFiles is jobsource.Files over the executor's SSH connection to
// the job's instance.
type instanceFiles struct {
	r  *executor.Runner
	ci provider.ConnectInfo
}

func (f instanceFiles) Stream(ctx context.Context, script string, stdin io.Reader, stdout io.Writer) (int, string, error) {
	return f.r.Stream(ctx, f.ci, script, stdin, stdout)
}

// prepare lets a Stager put files on the instance before the script.
func (m *Manager) prepare(ctx context.Context, job jobsource.Job, acq fleet.Acquisition) error {
	st, ok := job.(jobsource.Stager)
	if !ok {
		return nil
	}
	return st.Prepare(ctx, instanceFiles{m.runner, acq.Connect})
}

// collect lets a Stager take files from the instance after the job, with at
// most an hour for uploads; it may turn a success into a failure.
func (m *Manager) collect(ctx context.Context, job jobsource.Job, acq fleet.Acquisition, res jobsource.Result) jobsource.Result {
	st, ok := job.(jobsource.Stager)
	if !ok || acq.LostReason() != "" {
		return res
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Hour)
	defer cancel()
	return st.Collect(cctx, instanceFiles{m.runner, acq.Connect}, res)
}

// Prepare forwards to the GitLab job.
func (t *trackedJob) Prepare(ctx context.Context, f jobsource.Files) error {
	if st, ok := t.Job.(jobsource.Stager); ok {
		return st.Prepare(ctx, f)
	}
	return nil
}

// Collect forwards to the GitLab job.
func (t *trackedJob) Collect(ctx context.Context, f jobsource.Files, r jobsource.Result) jobsource.Result {
	if st, ok := t.Job.(jobsource.Stager); ok {
		return st.Collect(ctx, f, r)
	}
	return r
}

// cacheStore opens where GitLab jobs' caches are kept ([cache]).
func (m *Manager) cacheStore() (cache.Store, error) {
	c := m.cfg.Cache
	if c.S3Endpoint != "" {
		return cache.NewS3(cache.S3Config{Endpoint: c.S3Endpoint, Bucket: c.Bucket, Prefix: c.Prefix,
			AccessKey: c.AccessKey, SecretKey: c.SecretKey, Region: c.Region, Insecure: c.Insecure,
			MaxBytes: int64(c.MaxSizeMB) << 20}, m.log)
	}
	dir := c.Dir
	if dir == "" {
		dir = filepath.Join(m.cfg.StateDir, "cache")
	}
	return cache.NewLocal(dir, int64(c.MaxSizeMB)<<20, m.log)
}
