// Package localexec runs commands in a local sandbox without SSH: berth
// hands each command to the sandbox's init process (PID 1) over a socket
// pair berth made when it started the sandbox, and reads the command's
// output and exit status back from a socket pair of the command's own.
//
// For a sandbox berth itself started the SSH layer is pure overhead: a key
// exchange on both sides, three library goroutines and ~16 KiB of buffers
// and cipher state per connection in berth, keepalives. Here a running
// command costs berth one socket and the goroutine that waits for it, which
// is the job's own.
//
// # Protocol
//
// Both sockets are AF_UNIX SOCK_SEQPACKET: every message arrives whole, in
// order, and a closed peer reads as EOF.
//
// On the sandbox's exec socket berth sends one message per command: a JSON
// Request, carrying (SCM_RIGHTS) exactly two descriptors, the sandbox's end
// of the command's socket and the read end of a pipe that is the command's
// stdin. A pipe rather than framed stdin, because the kernel then does the
// flow control and the sandbox never buffers stdin for a command that does
// not read it.
//
// On the command's socket the sandbox sends frames: one type byte, then the
// payload. FrameStdout and FrameStderr carry output (at most MaxData bytes),
// FrameExit or FrameSignal end the command (a 4-byte big-endian status or
// signal number, sent once its output is drained) and FrameFailed says the
// command could not start (a message of at most MaxData bytes). Berth sends
// FrameSignal to signal the command's process group, and closing its end
// kills the process group, as a closed SSH channel does.
//
// Berth treats every frame as untrusted: unknown types, wrong sizes and
// out-of-range values end the command with a *ProtocolError.
package localexec

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Frame types.
const (
	FrameStdout byte = 1 // sandbox → berth: stdout data
	FrameStderr byte = 2 // sandbox → berth: stderr data
	FrameExit   byte = 3 // sandbox → berth: exit status, uint32 0..255
	FrameSignal byte = 4 // either way: a signal number, uint32 1..64
	FrameFailed byte = 5 // sandbox → berth: the command did not start
)

// MaxData is the most payload a data or failure frame carries.
const MaxData = 32 << 10

// MaxRequest bounds a request message; env entries that would not fit are
// left out (see Request.Env).
const MaxRequest = 64 << 10

// OpRecycle asks the sandbox to reset itself between two jobs instead of
// running a command: it answers FrameExit 0 once done, or FrameFailed.
const OpRecycle = "recycle"

// OpPing asks whether the sandbox's init process still serves; it answers
// FrameExit 0 at once. The heartbeat of an idle sandbox.
const OpPing = "ping"

// Request is what berth asks PID 1 to run.
type Request struct {
	// Op is empty for a command, or OpRecycle or OpPing.
	Op string `json:"op,omitempty"`
	// Command runs as `sh -c Command`, like an SSH exec request.
	Command string `json:"command"`
	// Env are NAME=VALUE pairs added to the command's environment, like
	// SSH env requests: PID 1 refuses unusable names, and berth leaves out
	// what does not fit MaxRequest (the executor exports the job's
	// variables in the script too, as it does for an sshd that refuses
	// env requests).
	Env []string `json:"env,omitempty"`
}

// ProtocolError reports a frame the sandbox should never have sent.
type ProtocolError struct {
	Reason string
}

// Error says what was wrong with the frame.
func (e *ProtocolError) Error() string {
	return "malformed reply from the sandbox's init process: " + e.Reason
}

// ErrLost is returned when the command's socket closed before an exit
// status arrived: the sandbox stopped or its init process died.
var ErrLost = errors.New("the command's socket closed without an exit status (the sandbox stopped or its init process died)")

// StartError is the sandbox's reason for not starting the command.
type StartError struct {
	Message string
}

// Error is the sandbox's message.
func (e *StartError) Error() string { return "the sandbox could not start the command: " + e.Message }

// Exit is how a command ended: Code, or Signal when a signal killed it.
type Exit struct {
	Code   int
	Signal int
}

// frame builds a frame of type typ with payload p.
func frame(typ byte, p []byte) []byte {
	b := make([]byte, 1+len(p))
	b[0] = typ
	copy(b[1:], p)
	return b
}

// numberFrame builds a frame carrying one uint32.
func numberFrame(typ byte, n uint32) []byte {
	b := make([]byte, 5)
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:], n)
	return b
}

// number reads the uint32 payload of an exit or signal frame and checks it
// lies in [lo, hi].
func number(f []byte, lo, hi uint32) (uint32, error) {
	if len(f) != 5 {
		return 0, &ProtocolError{Reason: fmt.Sprintf("frame type %d has %d payload bytes, want 4", f[0], len(f)-1)}
	}
	n := binary.BigEndian.Uint32(f[1:])
	if n < lo || n > hi {
		return 0, &ProtocolError{Reason: fmt.Sprintf("frame type %d carries %d, outside %d..%d", f[0], n, lo, hi)}
	}
	return n, nil
}
