//go:build linux

package localexec

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fakeSandbox stands in for a sandbox's PID 1: it keeps the descriptors
// of each request and lets the test write whatever frames it likes.
type fakeSandbox struct {
	req   []byte
	ctl   *os.File // the sandbox's end of the command's socket
	stdin *os.File
}

func (f *fakeSandbox) SendExec(msg []byte, fds []int) error {
	if len(fds) != 2 {
		return errors.New("want 2 descriptors")
	}
	ctl, _ := unix.Dup(fds[0])
	in, _ := unix.Dup(fds[1])
	f.req, f.ctl, f.stdin = msg, os.NewFile(uintptr(ctl), "ctl"), os.NewFile(uintptr(in), "stdin")
	return nil
}

func start(t *testing.T, stdin io.Reader) (*fakeSandbox, *Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	f := &fakeSandbox{}
	var out, errOut bytes.Buffer
	c, err := Start(f, Request{Command: "true"}, stdin, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); f.ctl.Close(); f.stdin.Close() })
	return f, c, &out, &errOut
}

func (f *fakeSandbox) send(t *testing.T, frames ...[]byte) {
	t.Helper()
	for _, fr := range frames {
		if _, err := f.ctl.Write(fr); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOutputAndExitStatus(t *testing.T) {
	f, c, out, errOut := start(t, nil)
	f.send(t, frame(FrameStdout, []byte("out")), frame(FrameStderr, []byte("err")), frame(FrameStdout, []byte("put")), numberFrame(FrameExit, 7))
	exit, err := c.Wait()
	if err != nil || exit != (Exit{Code: 7}) || out.String() != "output" || errOut.String() != "err" {
		t.Fatalf("Wait: %+v %v, stdout %q stderr %q", exit, err, out, errOut)
	}
}

func TestKilledBySignalIs128PlusN(t *testing.T) {
	f, c, _, _ := start(t, nil)
	f.send(t, numberFrame(FrameSignal, 9))
	if exit, err := c.Wait(); err != nil || exit != (Exit{Code: 137, Signal: 9}) {
		t.Fatalf("Wait: %+v %v", exit, err)
	}
}

func TestGarbageFramesAreProtocolErrors(t *testing.T) {
	cases := map[string][]byte{
		"unknown type":      {9, 1, 2},
		"short exit":        {FrameExit, 0, 0, 7},
		"exit out of range": numberFrame(FrameExit, 300),
		"signal 0":          numberFrame(FrameSignal, 0),
		"signal 99":         numberFrame(FrameSignal, 99),
		"oversized frame":   frame(FrameStdout, make([]byte, MaxData+1)),
	}
	for name, fr := range cases {
		t.Run(name, func(t *testing.T) {
			f, c, _, _ := start(t, nil)
			f.send(t, fr)
			var pe *ProtocolError
			if _, err := c.Wait(); !errors.As(err, &pe) {
				t.Fatalf("Wait: %v, want a *ProtocolError", err)
			}
		})
	}
}

func TestFrameCarryingDescriptorsIsRefusedAndTheyAreClosed(t *testing.T) {
	f, c, _, _ := start(t, nil)
	r, w, _ := os.Pipe()
	defer r.Close()
	if err := unix.Sendmsg(int(f.ctl.Fd()), []byte{FrameStdout, 'x'}, unix.UnixRights(int(w.Fd())), nil, 0); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var pe *ProtocolError
	if _, err := c.Wait(); !errors.As(err, &pe) {
		t.Fatalf("Wait: %v, want a *ProtocolError", err)
	}
	// The only write end left was the one sent: berth did not keep it.
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("the sent descriptor is still open somewhere: %d %v", n, err)
	}
}

func TestSandboxGoneWithoutExitIsLost(t *testing.T) {
	f, c, out, _ := start(t, nil)
	f.send(t, frame(FrameStdout, []byte("partial")))
	f.ctl.Close()
	if _, err := c.Wait(); !errors.Is(err, ErrLost) || out.String() != "partial" {
		t.Fatalf("Wait: %v (stdout %q), want ErrLost", err, out)
	}
}

func TestStartFailure(t *testing.T) {
	f, c, _, _ := start(t, nil)
	f.send(t, frame(FrameFailed, []byte("no such shell")))
	var se *StartError
	if _, err := c.Wait(); !errors.As(err, &se) || !strings.Contains(se.Error(), "no such shell") {
		t.Fatalf("Wait: %v, want a *StartError", err)
	}
}

func TestStdinArrivesAndEnds(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1<<20)
	f, c, _, _ := start(t, bytes.NewReader(big))
	got, err := io.ReadAll(f.stdin)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("stdin: %d bytes, %v", len(got), err)
	}
	f.send(t, numberFrame(FrameExit, 0))
	if _, err := c.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestKillSendsKillAndWaitReturns(t *testing.T) {
	f, c, _, _ := start(t, nil)
	done := make(chan error, 1)
	go func() { _, err := c.Wait(); done <- err }()
	c.Kill()
	if err := <-done; !errors.Is(err, errKilled) {
		t.Fatalf("Wait after Kill: %v", err)
	}
	buf := make([]byte, 16)
	n, _ := f.ctl.Read(buf)
	if sig, err := number(buf[:n], 1, 64); err != nil || sig != uint32(unix.SIGKILL) {
		t.Fatalf("sandbox got %v (%v), want a KILL frame", buf[:n], err)
	}
	if n, err := f.ctl.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("socket not closed after Kill: %d %v", n, err)
	}
}

func TestEnvLeftOutBeyondTheRequestLimit(t *testing.T) {
	env := []string{"A=1", "B=" + strings.Repeat("b", MaxRequest)}
	b, err := encodeRequest(Request{Command: "true", Env: env})
	if err != nil || len(b) > MaxRequest || !strings.Contains(string(b), "A=1") {
		t.Fatalf("encodeRequest: %d bytes, %v", len(b), err)
	}
	if _, err := encodeRequest(Request{Command: strings.Repeat("c", MaxRequest)}); err == nil {
		t.Fatal("a command larger than a request: no error")
	}
}

// TestReceiveChecksRequests is the sandbox side: wrong descriptor counts
// and bad JSON are skipped with their descriptors closed; EOF ends.
func TestReceiveChecksRequests(t *testing.T) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.SetNonblock(pair[1], true)
	berth, sandbox := pair[0], os.NewFile(uintptr(pair[1]), "exec")
	defer sandbox.Close()
	r, w, _ := os.Pipe()
	defer r.Close()
	send := func(msg string, fds ...int) {
		if err := unix.Sendmsg(berth, []byte(msg), unix.UnixRights(fds...), nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"command":"x"}`, int(w.Fd()))
	send(`not json`, int(w.Fd()), int(w.Fd()))
	unix.Sendmsg(berth, []byte(`{"command":"x"}`), nil, nil, 0)
	for i := 0; i < 3; i++ {
		var bad *BadRequest
		if _, _, err := Receive(sandbox); !errors.As(err, &bad) {
			t.Fatalf("request %d: %v, want *BadRequest", i, err)
		}
	}
	w.Close()
	// Every copy of the write end is closed again: the reader sees EOF.
	if n, err := r.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("a received descriptor was kept: %d %v", n, err)
	}
	unix.Close(berth)
	if _, _, err := Receive(sandbox); err != io.EOF {
		t.Fatalf("after berth closed: %v, want io.EOF", err)
	}
}
