package executor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"golang.org/x/crypto/ssh"
)

// sshClient is an SSH client connection without ssh.Client's three
// goroutines per connection (global requests, channel opens, close
// watcher): one goroutine turns down both what the server asks and the
// channels it tries to open, as ssh.Client does. With thousands of running
// jobs each goroutine costs its stack per job.
type sshClient struct {
	ssh.Conn
}

func newSSHClient(c ssh.Conn, chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request) *sshClient {
	go refuseIncoming(chans, reqs)
	return &sshClient{c}
}

// refuseIncoming answers every global request with a failure and rejects
// every channel the server opens, until the connection closes.
func refuseIncoming(chans <-chan ssh.NewChannel, reqs <-chan *ssh.Request) {
	for chans != nil || reqs != nil {
		select {
		case nc, ok := <-chans:
			if !ok {
				chans = nil
				continue
			}
			nc.Reject(ssh.UnknownChannelType, "unknown channel type")
		case r, ok := <-reqs:
			if !ok {
				reqs = nil
				continue
			}
			if r.WantReply {
				r.Reply(false, nil)
			}
		}
	}
}

// session runs one command on an SSH "session" channel (RFC 4254 section
// 6) like ssh.Session, with two goroutines where ssh.Session has three:
// the caller's own goroutine copies stdout in Wait, one goroutine copies
// stderr and one serves the channel's requests (the exit status, and
// keepalives a server such as OpenSSH with ClientAliveInterval sends, which
// must be answered while the command runs). Stdin is copied by a goroutine
// that ends once the input is sent.
type session struct {
	ch     ssh.Channel
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer

	started  bool
	exit     chan exitStatus // the requests' outcome, once the channel closes
	copyErrs chan error      // stdin's and stderr's copies
}

// exitStatus is how the remote command ended, from the channel's requests.
type exitStatus struct {
	code   int // -1 when the server sent none
	signal string
	err    error // a malformed request
}

func (c *sshClient) NewSession() (*session, error) {
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		return nil, err
	}
	s := &session{ch: ch, exit: make(chan exitStatus, 1), copyErrs: make(chan error, 2)}
	go func() { s.exit <- serveRequests(reqs) }()
	return s, nil
}

// Setenv asks the server to set an environment variable for the command.
func (s *session) Setenv(name, value string) error {
	ok, err := s.ch.SendRequest("env", true, ssh.Marshal(&struct{ Name, Value string }{name, value}))
	if err == nil && !ok {
		err = errors.New("ssh: setenv failed")
	}
	return err
}

// Start runs cmd on the server.
func (s *session) Start(cmd string) error {
	if s.started {
		return errors.New("ssh: session already started")
	}
	ok, err := s.ch.SendRequest("exec", true, ssh.Marshal(&struct{ Command string }{cmd}))
	if err == nil && !ok {
		err = fmt.Errorf("ssh: command %v failed", cmd)
	}
	if err != nil {
		return err
	}
	s.started = true
	go func() {
		var err error
		if s.Stdin != nil {
			_, err = io.Copy(s.ch, s.Stdin)
		}
		if err1 := s.ch.CloseWrite(); err == nil && err1 != io.EOF {
			err = err1
		}
		s.copyErrs <- err
	}()
	go func() {
		_, err := io.Copy(orDiscard(s.Stderr), s.ch.Stderr())
		s.copyErrs <- err
	}()
	return nil
}

// Wait copies the command's stdout until the channel ends and returns how
// the command ended: nil for exit status 0, *remoteExit for another status
// or a signal, *ssh.ExitMissingError when the server sent neither.
func (s *session) Wait() error {
	if !s.started {
		return errors.New("ssh: session not started")
	}
	_, copyErr := io.Copy(orDiscard(s.Stdout), s.ch)
	st := <-s.exit
	for range 2 {
		if err := <-s.copyErrs; err != nil && copyErr == nil {
			copyErr = err
		}
	}
	switch {
	case st.err != nil:
		return st.err
	case st.code == 0:
		return copyErr
	case st.code == -1 && st.signal == "":
		return &ssh.ExitMissingError{}
	}
	return &remoteExit{code: st.code, signal: st.signal}
}

// Signal sends a signal to the remote command.
func (s *session) Signal(sig ssh.Signal) error {
	_, err := s.ch.SendRequest("signal", false, ssh.Marshal(&struct{ Signal string }{string(sig)}))
	return err
}

// Close closes the channel; Wait then returns.
func (s *session) Close() error { return s.ch.Close() }

// serveRequests collects the exit status and signal from the channel's
// requests and turns down every other request (keepalives), until the
// channel closes.
func serveRequests(reqs <-chan *ssh.Request) exitStatus {
	st := exitStatus{code: -1}
	for r := range reqs {
		switch r.Type {
		case "exit-status":
			if len(r.Payload) < 4 {
				st.err = errors.New("ssh: malformed exit-status request")
				continue
			}
			st.code = int(binary.BigEndian.Uint32(r.Payload))
		case "exit-signal":
			var sig struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}
			if err := ssh.Unmarshal(r.Payload, &sig); err != nil {
				st.err = err
				continue
			}
			st.signal = sig.Signal
		default:
			if r.WantReply {
				r.Reply(false, nil)
			}
		}
	}
	if st.code == -1 && st.signal != "" {
		st.code = 128 + signalNumbers[st.signal]
	}
	return st
}

// signalNumbers are the signal names of RFC 4254 section 6.10 and their
// Linux numbers, for the 128+N exit code of a command a signal killed.
var signalNumbers = map[string]int{
	"HUP": 1, "INT": 2, "QUIT": 3, "ILL": 4, "ABRT": 6, "FPE": 8, "KILL": 9,
	"USR1": 10, "SEGV": 11, "USR2": 12, "PIPE": 13, "ALRM": 14, "TERM": 15,
}

// remoteExit reports a command that ended with a non-zero status or was
// killed by a signal.
type remoteExit struct {
	code   int
	signal string
}

func (e *remoteExit) Error() string {
	if e.signal != "" {
		return fmt.Sprintf("remote command killed by signal %s", e.signal)
	}
	return fmt.Sprintf("remote command exited with status %d", e.code)
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
