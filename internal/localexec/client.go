package localexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Sender delivers a request and its descriptors to a sandbox's PID 1; the
// local provider implements it (provider.LocalExec).
type Sender interface {
	SendExec(msg []byte, fds []int) error
}

// Cmd is a command running in a sandbox, seen from berth.
type Cmd struct {
	sock   *os.File // berth's end of the command's socket (nonblocking: the netpoller waits)
	stdin  *os.File // write end of the command's stdin pipe
	copied chan error
	stdout io.Writer
	stderr io.Writer

	mu     sync.Mutex
	killed bool
}

// buffers hold one frame while it is handled: a command waiting for
// output holds none.
var buffers = sync.Pool{New: func() any { b := make([]byte, 1+MaxData); return &b }}

// errKilled is what Wait returns after Kill.
var errKilled = errors.New("the command was killed")

// Start sends req to the sandbox through s and returns the running command.
// stdin, when not nil, is copied to the command by a goroutine that ends
// once it is sent; stdout and stderr receive the command's output in Wait,
// on the caller's goroutine.
func Start(s Sender, req Request, stdin io.Reader, stdout, stderr io.Writer) (*Cmd, error) {
	msg, err := encodeRequest(req)
	if err != nil {
		return nil, err
	}
	pair, pipe, err := commandFDs()
	if err != nil {
		return nil, err
	}
	err = s.SendExec(msg, []int{pair[1], pipe[0]})
	// The sandbox has its own copies now (or none, on error).
	unix.Close(pair[1])
	unix.Close(pipe[0])
	if err == nil {
		err = unix.SetNonblock(pipe[1], true)
	}
	if err != nil {
		unix.Close(pair[0])
		unix.Close(pipe[1])
		return nil, err
	}
	c := &Cmd{
		sock:   os.NewFile(uintptr(pair[0]), "localexec"),
		stdin:  os.NewFile(uintptr(pipe[1]), "localexec-stdin"),
		stdout: orDiscard(stdout), stderr: orDiscard(stderr),
	}
	if stdin == nil {
		c.stdin.Close()
		return c, nil
	}
	c.copied = make(chan error, 1)
	go func() {
		_, err := io.Copy(c.stdin, stdin)
		c.stdin.Close()
		c.copied <- err
	}()
	return c, nil
}

// encodeRequest marshals req, leaving out the env entries that would make
// it larger than MaxRequest.
func encodeRequest(req Request) ([]byte, error) {
	for {
		b, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		if len(b) <= MaxRequest {
			return b, nil
		}
		if len(req.Env) == 0 {
			return nil, fmt.Errorf("the command is %d bytes, more than the %d a local exec request holds", len(req.Command), MaxRequest)
		}
		req.Env = req.Env[:len(req.Env)-1]
	}
}

// Wait copies the command's output to stdout and stderr until it ends and
// returns how it ended. Errors: ErrLost when the sandbox went away,
// *StartError when it could not start the command, *ProtocolError for a
// frame it should not have sent, and an error after Kill.
func (c *Cmd) Wait() (Exit, error) {
	for {
		var exit *Exit
		err := c.next(func(f []byte) error {
			switch f[0] {
			case FrameStdout:
				c.stdout.Write(f[1:])
			case FrameStderr:
				c.stderr.Write(f[1:])
			case FrameExit:
				n, err := number(f, 0, 255)
				if err != nil {
					return err
				}
				exit = &Exit{Code: int(n)}
			case FrameSignal:
				n, err := number(f, 1, 64)
				if err != nil {
					return err
				}
				exit = &Exit{Code: 128 + int(n), Signal: int(n)}
			case FrameFailed:
				return &StartError{Message: string(f[1:])}
			default:
				return &ProtocolError{Reason: fmt.Sprintf("unknown frame type %d (%d bytes)", f[0], len(f))}
			}
			return nil
		})
		if err != nil {
			return Exit{}, err
		}
		if exit != nil {
			return *exit, nil
		}
	}
}

// next reads one frame and hands it to handle. It waits for the frame
// through the netpoller holding no buffer; a pooled one is taken only once
// the socket is readable.
func (c *Cmd) next(handle func(f []byte) error) error {
	rc, err := c.sock.SyscallConn()
	if err != nil {
		return c.readErr(err)
	}
	var (
		bp       *[]byte
		n, flags int
		rerr     error
	)
	err = rc.Read(func(fd uintptr) bool {
		bp = buffers.Get().(*[]byte)
		n, _, flags, _, rerr = unix.Recvmsg(int(fd), *bp, nil, unix.MSG_DONTWAIT)
		if rerr == unix.EAGAIN || rerr == unix.EINTR {
			buffers.Put(bp)
			bp = nil
			return false
		}
		return true
	})
	if bp != nil {
		defer buffers.Put(bp)
	}
	switch {
	case err != nil:
		return c.readErr(err)
	case rerr == unix.ECONNRESET:
		return ErrLost
	case rerr != nil:
		return c.readErr(rerr)
	case n == 0:
		// Frames are never empty: this is the peer closing.
		return ErrLost
	case flags&unix.MSG_TRUNC != 0:
		return &ProtocolError{Reason: fmt.Sprintf("a frame longer than %d bytes", 1+MaxData)}
	case flags&unix.MSG_CTRUNC != 0:
		return &ProtocolError{Reason: "a frame carried descriptors"}
	}
	return handle((*bp)[:n])
}

// readErr is a read error, or errKilled when Kill closed the socket.
func (c *Cmd) readErr(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.killed {
		return errKilled
	}
	return fmt.Errorf("read the command's socket: %w", err)
}

// Signal sends signal sig to the command's process group.
func (c *Cmd) Signal(sig unix.Signal) error {
	_, err := c.sock.Write(numberFrame(FrameSignal, uint32(sig)))
	return err
}

// Kill kills the command's process group and closes its socket; Wait
// returns at once.
func (c *Cmd) Kill() {
	c.mu.Lock()
	c.killed = true
	c.mu.Unlock()
	_ = c.Signal(unix.SIGKILL)
	c.sock.Close()
	c.stdin.Close()
}

// Close closes the command's socket, which kills what is left of it in the
// sandbox, and waits for the stdin copy to end.
func (c *Cmd) Close() error {
	c.sock.Close()
	c.stdin.Close()
	if c.copied != nil {
		err := <-c.copied
		c.copied = nil
		if errors.Is(err, unix.EPIPE) || errors.Is(err, os.ErrClosed) {
			// The command ended without reading all its stdin.
			return nil
		}
		return err
	}
	return nil
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}
