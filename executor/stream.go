package executor

import (
	"bytes"
	"context"
	"errors"
	"io"

	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/provider"
)

// Stream runs a short script on the instance ci describes with stdin and
// stdout streamed, for moving files (artifacts, caches) to and from it over
// the same SSH connection a job uses. Unlike Run the script travels as the
// command, so stdin is free for data; it must hold no secret (it may show in
// the instance's process list). stderr is returned, cut to OutputLimit.
// Errors are as for Run; ctx bounds the whole transfer.
func (r *Runner) Stream(ctx context.Context, ci provider.ConnectInfo, script string, stdin io.Reader, stdout io.Writer) (exitCode int, stderr string, err error) {
	if ci.Local != nil {
		return r.streamLocal(ctx, ci, script, stdin, stdout)
	}
	client, err := r.dial(ctx, ci)
	if err != nil {
		if ctx.Err() != nil {
			return -1, "", stopError(ctx, ci, Command{})
		}
		return -1, "", err
	}
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		return -1, "", &SystemError{Instance: ci.ID, Op: "open session", Err: err}
	}
	defer sess.Close()
	errBuf := &limitedBuffer{max: OutputLimit}
	if stdout == nil {
		stdout = io.Discard
	}
	sess.Stdout, sess.Stderr = stdout, errBuf
	if stdin != nil {
		sess.Stdin = stdin
	} else {
		sess.Stdin = bytes.NewReader(nil)
	}
	if err := sess.Start("sh -c " + ShellQuote(script)); err != nil {
		return -1, "", &SystemError{Instance: ci.ID, Op: "start transfer", Err: err}
	}
	lost := &lostCause{}
	stopKA := r.keepAlive(client, lost)
	defer stopKA()
	waited := make(chan error, 1)
	go func() { waited <- sess.Wait() }()
	var waitErr error
	select {
	case waitErr = <-waited:
	case <-ctx.Done():
		_ = sess.Signal(ssh.SIGKILL)
		_ = client.Close()
		<-waited
		return -1, string(errBuf.Bytes()), stopError(ctx, ci, Command{})
	}
	stopKA()
	code, err := exitResult(ci, waitErr, lost.get())
	return code, string(errBuf.Bytes()), err
}

// streamLocal is Stream through a local sandbox's exec socket.
func (r *Runner) streamLocal(ctx context.Context, ci provider.ConnectInfo, script string, stdin io.Reader, stdout io.Writer) (int, string, error) {
	c, err := r.open(ctx, ci)
	if err != nil {
		return -1, "", err
	}
	defer c.close()
	errBuf := &limitedBuffer{max: OutputLimit}
	if err := c.start("sh -c "+ShellQuote(script), stdin, orDiscard(stdout), errBuf); err != nil {
		if errors.Is(err, provider.ErrLocalExecUnavailable) {
			ci.Local = nil
			return r.Stream(ctx, ci, script, stdin, stdout)
		}
		return -1, "", &SystemError{Instance: ci.ID, Op: "start transfer", Err: err}
	}
	waitErr, killed := r.wait(ctx, c)
	if killed {
		return -1, string(errBuf.Bytes()), stopError(ctx, ci, Command{})
	}
	code, err := exitResult(ci, waitErr, c.lost())
	return code, string(errBuf.Bytes()), err
}
