package jobsource

import (
	"context"
	"io"
)

// Files moves data to and from a job's instance: it runs a short script
// there with stdin and stdout streamed (the executor's SSH connection), and
// returns its exit code and what it wrote to stderr.
type Files interface {
	Stream(ctx context.Context, script string, stdin io.Reader, stdout io.Writer) (exitCode int, stderr string, err error)
}

// Stager is a job that needs files on its instance before its script
// (GitLab: caches and the artifacts of its dependencies) and collects files
// after it (GitLab: caches and its own artifacts).
type Stager interface {
	// Prepare runs once the job has its instance, before the script. An
	// error fails the job without running the script; its message says
	// what is missing.
	Prepare(ctx context.Context, f Files) error
	// Collect runs after the script and after_script with how the job
	// ended, and returns how it ends now: an artifact upload that fails
	// fails the job. It also removes what Prepare left on the instance.
	Collect(ctx context.Context, f Files, r Result) Result
}
