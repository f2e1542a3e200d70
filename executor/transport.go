package executor

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/provider"
)

// command is one command on an instance, whichever way it is reached: an
// SSH session (sshCommand), or the local exec socket of a sandbox this
// process started (localCommand, see local.go). Run, Output, RunInImage and
// Stream hold the logic (exit codes, stopping, which errors are system
// errors); a command only moves bytes and reports how the remote command
// ended.
type command interface {
	// setenv asks for a variable in the command's environment; a refusal
	// is not an error (the script exports them too).
	setenv(name, value string)
	// start starts remote with the given stdio.
	start(remote string, stdin io.Reader, stdout, stderr io.Writer) error
	// wait copies output until the command ends, on the caller's
	// goroutine: nil for exit status 0, *remoteExit for another status or
	// a signal, *SystemError or another error when the transport ended
	// first.
	wait() error
	// kill kills the command and makes wait return.
	kill()
	// lost is why the transport gave up (keepalive), nil if it did not.
	lost() error
	// close releases the command and its transport.
	close()
}

// open returns a command on ci: over its local exec socket when the
// provider gave one, else on a (shared) SSH connection.
func (r *Runner) open(ctx context.Context, ci provider.ConnectInfo) (command, error) {
	if ci.Local != nil {
		return &localCommand{ci: ci}, nil
	}
	c, sess, err := r.openSession(ctx, ci)
	if err != nil {
		return nil, err
	}
	return &sshCommand{r: r, c: c, s: sess}, nil
}

// sshCommand is a command in an SSH session on a pooled connection.
type sshCommand struct {
	r      *Runner
	c      *conn
	s      *session
	waited atomic.Bool
}

func (x *sshCommand) setenv(name, value string) { _ = x.s.Setenv(name, value) }

func (x *sshCommand) start(remote string, stdin io.Reader, stdout, stderr io.Writer) error {
	x.s.Stdin, x.s.Stdout, x.s.Stderr = stdin, stdout, stderr
	return x.s.Start(remote)
}

func (x *sshCommand) wait() error {
	err := x.s.Wait()
	x.waited.Store(true)
	return err
}

// kill sends KILL and closes the session, and the connection unless other
// commands share it: then only if the session does not end within
// killGrace (a server that stopped answering).
func (x *sshCommand) kill() {
	r, c := x.r, x.c
	_ = x.s.Signal(ssh.SIGKILL)
	_ = x.s.Close()
	// No command joins a connection from now on that may be closed
	// under it.
	r.forget(c)
	if !r.shared(c) {
		_ = c.client.Close()
		return
	}
	time.AfterFunc(killGrace, func() {
		if !x.waited.Load() {
			_ = c.client.Close()
		}
	})
}

func (x *sshCommand) lost() error { return x.c.lost.get() }

func (x *sshCommand) close() {
	x.s.Close()
	x.r.release(x.c)
}
