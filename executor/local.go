package executor

import (
	"errors"
	"io"
	"strconv"

	"github.com/berth-ci/berth/internal/localexec"
	"github.com/berth-ci/berth/provider"
)

// localCommand runs a command in a local sandbox through its init process
// (package localexec): no handshake, no SSH connection, no goroutine in
// berth but the caller's while the command runs (and a stdin copier while
// there is stdin to send). The provider sets ConnectInfo.Local only for
// sandboxes it started itself, so the socket cannot belong to anyone else;
// what comes back on it is still checked like any reply from an instance.
type localCommand struct {
	ci  provider.ConnectInfo
	env []string
	cmd *localexec.Cmd
}

func (l *localCommand) setenv(name, value string) { l.env = append(l.env, name+"="+value) }

func (l *localCommand) start(remote string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd, err := localexec.Start(l.ci.Local, localexec.Request{Command: remote, Env: l.env}, stdin, stdout, stderr)
	if err != nil {
		return err
	}
	l.cmd = cmd
	return nil
}

// wait maps how the command ended onto what sshCommand.wait returns, so
// that Run treats both alike: a sandbox that went away is a lost
// connection, a malformed reply a system error naming the instance.
func (l *localCommand) wait() error {
	exit, err := l.cmd.Wait()
	var (
		start *localexec.StartError
		proto *localexec.ProtocolError
	)
	switch {
	case err == nil && exit.Code == 0:
		return nil
	case err == nil:
		return &remoteExit{code: exit.Code, signal: signalName(exit.Signal)}
	case errors.Is(err, localexec.ErrLost):
		return &SystemError{Instance: l.ci.ID, Op: "connection lost", Err: err}
	case errors.As(err, &start):
		return &SystemError{Instance: l.ci.ID, Op: "start script", Err: err}
	case errors.As(err, &proto):
		return &SystemError{Instance: l.ci.ID, Op: "local exec", Err: err}
	}
	return &SystemError{Instance: l.ci.ID, Op: "connection lost", Err: err}
}

func (l *localCommand) kill() { l.cmd.Kill() }

func (l *localCommand) lost() error { return nil }

func (l *localCommand) close() {
	if l.cmd != nil {
		l.cmd.Close()
	}
}

// signalName is the SSH name of signal n, for messages; its number when
// it has none.
func signalName(n int) string {
	if n == 0 {
		return ""
	}
	for name, num := range signalNumbers {
		if num == n {
			return name
		}
	}
	return strconv.Itoa(n)
}
