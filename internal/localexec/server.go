//go:build linux

package localexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// BadRequest reports a request the sandbox could not use; the exec socket
// itself is fine and serving goes on.
type BadRequest struct {
	Reason string
}

// Error says what was wrong.
func (e *BadRequest) Error() string { return "bad local exec request: " + e.Reason }

// Receive reads the next request from the sandbox's exec socket (a
// nonblocking SOCK_SEQPACKET socket the netpoller watches) and returns it
// with the command's connection. It returns io.EOF once berth closed its
// end, and *BadRequest for a message to skip.
func Receive(sock *os.File) (Request, *Conn, error) {
	rc, err := sock.SyscallConn()
	if err != nil {
		return Request{}, nil, err
	}
	buf := make([]byte, MaxRequest+1)
	oob := make([]byte, unix.CmsgSpace(3*4)) // room for one descriptor too many
	var (
		n, oobn, flags int
		rerr           error
	)
	err = rc.Read(func(fd uintptr) bool {
		n, oobn, flags, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC|unix.MSG_DONTWAIT)
		return rerr != unix.EAGAIN && rerr != unix.EINTR
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return Request{}, nil, err
	}
	if n == 0 && oobn == 0 {
		return Request{}, nil, io.EOF
	}
	fds, ferr := descriptors(oob[:oobn])
	fail := func(reason string) (Request, *Conn, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return Request{}, nil, &BadRequest{Reason: reason}
	}
	switch {
	case ferr != nil:
		return fail(ferr.Error())
	case flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0:
		return fail("message or its descriptors truncated")
	case len(fds) != 2:
		return fail(fmt.Sprintf("%d descriptors, want 2", len(fds)))
	}
	var req Request
	if err := json.Unmarshal(buf[:n], &req); err != nil {
		return fail(err.Error())
	}
	for _, fd := range fds {
		if err := unix.SetNonblock(fd, true); err != nil {
			return fail(err.Error())
		}
	}
	return req, &Conn{sock: os.NewFile(uintptr(fds[0]), "localexec"), stdin: os.NewFile(uintptr(fds[1]), "localexec-stdin")}, nil
}

// descriptors returns the descriptors of the SCM_RIGHTS messages in oob.
func descriptors(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	var bad error
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			bad = errors.New("a control message other than SCM_RIGHTS")
			continue
		}
		fds = append(fds, got...)
	}
	return fds, bad
}

// Conn is one command's connection, seen from the sandbox: Read reads its
// stdin, Write sends stdout frames, Stderr sends stderr frames. Writes are
// safe from two goroutines (each frame is one message).
type Conn struct {
	sock  *os.File
	stdin *os.File
}

// Read reads the command's stdin.
func (c *Conn) Read(p []byte) (int, error) { return c.stdin.Read(p) }

// Write sends p as stdout frames.
func (c *Conn) Write(p []byte) (int, error) { return c.send(FrameStdout, p) }

// Stderr returns the writer for stderr frames.
func (c *Conn) Stderr() io.ReadWriter { return stderr{c} }

type stderr struct{ c *Conn }

func (s stderr) Write(p []byte) (int, error) { return s.c.send(FrameStderr, p) }
func (s stderr) Read([]byte) (int, error)    { return 0, io.EOF }

func (c *Conn) send(typ byte, p []byte) (int, error) {
	sent := 0
	for len(p) > 0 {
		n := min(len(p), MaxData)
		if _, err := c.sock.Write(frame(typ, p[:n])); err != nil {
			return sent, err
		}
		sent += n
		p = p[n:]
	}
	return sent, nil
}

// Exit reports the command's exit status, or the signal that killed it
// when sig is not 0.
func (c *Conn) Exit(code, sig int) error {
	if sig != 0 {
		_, err := c.sock.Write(numberFrame(FrameSignal, uint32(sig)))
		return err
	}
	_, err := c.sock.Write(numberFrame(FrameExit, uint32(code)))
	return err
}

// Fail reports that the command could not start.
func (c *Conn) Fail(msg string) error {
	if len(msg) > MaxData {
		msg = msg[:MaxData]
	}
	_, err := c.sock.Write(frame(FrameFailed, []byte(msg)))
	return err
}

// Signals calls fn for each signal berth sends, until berth closes its end
// (or the socket is closed here); frames of other types are ignored.
func (c *Conn) Signals(fn func(sig unix.Signal)) {
	buf := make([]byte, 16)
	for {
		n, err := c.sock.Read(buf)
		if err != nil || n == 0 {
			return
		}
		if n == 5 && buf[0] == FrameSignal {
			if sig, err := number(buf[:n], 1, 64); err == nil {
				fn(unix.Signal(sig))
			}
		}
	}
}

// Close closes the connection and the command's stdin.
func (c *Conn) Close() error {
	c.stdin.Close()
	return c.sock.Close()
}
