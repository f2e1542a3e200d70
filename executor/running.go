package executor

import (
	"context"
	"errors"
	"io"
	"strings"

	"github.com/berth-ci/berth/provider"
)

// Running is a command that Start started; Wait waits for it. Run is
// Start then Wait. They are apart so that the goroutine that waits (one
// per running job in berth) holds only Wait's few frames below its own:
// the runtime halves a goroutine's stack at a GC only while less than a
// quarter of it is in use, and what a job's goroutine holds for the
// whole run decides whether its stack comes back to 4 KiB after growing
// while the job started.
type Running struct {
	r      *Runner
	ci     provider.ConnectInfo
	cmd    Command
	ctx    context.Context
	cancel context.CancelFunc
	c      command
	out    *syncWriter
	err    error // why the command did not start
}

// Start starts cmd on the instance ci describes. Whether it started is
// told by Wait, with the same outcomes as Run's.
func (r *Runner) Start(ctx context.Context, ci provider.ConnectInfo, cmd Command) *Running {
	x := &Running{r: r, ci: ci, cmd: cmd, ctx: ctx, cancel: func() {}}
	x.err = x.start(ctx)
	return x
}

func (x *Running) start(ctx context.Context) error {
	input, err := scriptInput(x.cmd)
	if err != nil {
		return err
	}
	x.ctx, x.cancel = ctx, func() {}
	if x.cmd.Timeout > 0 {
		x.ctx, x.cancel = context.WithTimeoutCause(ctx, x.cmd.Timeout, errCommandTimeout)
	}
	c, err := x.r.open(x.ctx, x.ci)
	if err != nil {
		if x.ctx.Err() != nil {
			return stopError(x.ctx, x.ci, x.cmd)
		}
		return err
	}
	x.c = c
	for _, kv := range x.cmd.Env {
		k, v, _ := strings.Cut(kv, "=")
		// Refusals are expected (AcceptEnv); the exports in the script
		// cover them.
		c.setenv(k, v)
	}
	x.out = &syncWriter{w: x.cmd.Output}
	if x.out.w == nil {
		x.out.w = io.Discard
	}
	var stdin io.Reader = strings.NewReader(input)
	remote := wrapperCommand
	if x.cmd.remote != "" {
		remote, stdin = x.cmd.remote, x.cmd.stdin
	}
	if err := c.start(remote, stdin, x.out, x.out); err != nil {
		if errors.Is(err, provider.ErrLocalExecUnavailable) {
			// Nothing was sent, stdin untouched: over SSH then.
			x.release()
			x.ci.Local = nil
			return x.start(ctx)
		}
		return &SystemError{Instance: x.ci.ID, Op: "start script", Err: err}
	}
	return nil
}

// Wait waits for the command and returns the script's exit code, as Run.
// It returns only once nothing more will be written to cmd.Output.
func (x *Running) Wait() (exitCode int, err error) {
	if x.err != nil {
		return x.failed()
	}
	waitErr, killed := x.r.wait(x.ctx, x.c)
	return x.ended(waitErr, killed)
}

func (x *Running) failed() (int, error) {
	x.release()
	return -1, x.err
}

func (x *Running) ended(waitErr error, killed bool) (int, error) {
	defer x.release()
	if killed {
		return -1, stopError(x.ctx, x.ci, x.cmd)
	}
	if werr := x.out.writeErr(); werr != nil {
		x.r.logger().Warn("job output dropped after a write error", "instance", x.ci.ID, "err", werr)
	}
	return exitResult(x.ci, waitErr, x.c.lost())
}

// release closes the command's session and stops its timeout.
func (x *Running) release() {
	if x.c != nil {
		x.c.close()
		x.c = nil
	}
	x.cancel()
}
