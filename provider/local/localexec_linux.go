package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/internal/localexec"
	"github.com/berth-ci/berth/provider"
)

// The local exec path (package internal/localexec): every sandbox this
// process starts gets a SOCK_SEQPACKET socket pair end as execFD, and
// ConnectInfo hands the executor berth's end (ConnectInfo.Local), so jobs
// on the sandbox run without SSH. SSH stays for everything else: adopted
// sandboxes (a restarted berth holds no socket to them) and the
// berth-provider-local plugin. Recycle (once per job) and Heartbeat (every
// heartbeat_interval per idle instance) use the socket too (OpRecycle,
// OpPing), so a sandbox this process runs sees no SSH handshake at all.

// execFD is the sandbox's end of berth's exec socket, when
// sandboxConfig.Exec.
const execFD = 11

// localExecEnabled turns the local exec path on for new sandboxes.
const localExecEnabled = true

// execHost is berth's end of one sandbox's exec socket.
type execHost struct {
	f *os.File // nonblocking: a full socket waits in the netpoller
}

var _ provider.LocalExec = (*execHost)(nil)

// SendExec sends one request with its descriptors to the sandbox's PID 1.
func (e *execHost) SendExec(msg []byte, fds []int) error {
	rc, err := e.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		serr = unix.Sendmsg(int(fd), msg, unix.UnixRights(fds...), nil, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL)
		return serr != unix.EAGAIN && serr != unix.EINTR
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("the sandbox's init process does not take commands any more (it stopped): %w", serr)
	}
	return nil
}

// newExecSocket makes the exec socket pair of a sandbox about to start:
// berth's end and the sandbox's end (to pass as execFD).
func newExecSocket() (*execHost, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return &execHost{f: os.NewFile(uintptr(fds[0]), "exec")}, os.NewFile(uintptr(fds[1]), "exec-sandbox"), nil
}

// execs holds berth's end of the exec socket of every sandbox this process
// started, by instance ID.
type execs struct {
	mu sync.Mutex
	m  map[string]*execHost
}

// set records host for id, closing the socket of an earlier sandbox of id.
func (x *execs) set(id string, host *execHost) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[string]*execHost{}
	}
	if old := x.m[id]; old != nil && old != host {
		old.f.Close()
	}
	x.m[id] = host
}

// get returns id's socket, nil when this process holds none.
func (x *execs) get(id string) *execHost {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.m[id]
}

// drop closes and forgets id's socket.
func (x *execs) drop(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if h := x.m[id]; h != nil {
		h.f.Close()
		delete(x.m, id)
	}
}

// localExec returns the exec socket of instance id when the sandbox that
// runs now is the one this process started (and still reaps) with it.
func (p *Provider) localExec(id string, m *meta) provider.LocalExec {
	h := p.execs.get(id)
	if h == nil || !p.isOurChild(id, m) {
		return nil
	}
	return execHandle{p, id}
}

// execHandle is ConnectInfo.Local: it finds the instance's socket on every
// command, because a ConnectInfo may outlive its sandbox process (a
// suspend without a cgroup to freeze kills the sandbox, and the resume
// starts a new one with a new socket).
type execHandle struct {
	p  *Provider
	id string
}

// SendExec sends through the socket of the sandbox that runs now.
func (e execHandle) SendExec(msg []byte, fds []int) error {
	h := e.p.execs.get(e.id)
	if h == nil {
		return provider.ErrLocalExecUnavailable
	}
	return h.SendExec(msg, fds)
}

// isOurChild reports whether m's sandbox is a live child of this process.
func (p *Provider) isOurChild(id string, m *meta) bool {
	p.mu.Lock()
	c, ok := p.children[id]
	p.mu.Unlock()
	if !ok || m.PID <= 0 || c.pid != m.PID {
		return false
	}
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// takeExecSocket readies execFD in PID 1 before anything starts a process:
// no job or launcher may inherit it.
func takeExecSocket() (*os.File, error) {
	if err := unix.SetNonblock(execFD, true); err != nil {
		return nil, err
	}
	unix.CloseOnExec(execFD)
	return os.NewFile(execFD, "exec"), nil
}

// serveExec runs the commands berth sends on the exec socket until berth
// closes its end (berth stopped: commands then come over SSH only).
func (s *sshd) serveExec(sock *os.File) {
	defer sock.Close()
	for {
		req, c, err := localexec.Receive(sock)
		var bad *localexec.BadRequest
		switch {
		case errors.As(err, &bad):
			s.log.Warn("local exec request skipped", "err", err)
			continue
		case err == io.EOF:
			s.log.Info("berth closed the local exec socket; commands come over SSH only")
			return
		case err != nil:
			s.log.Error("local exec socket failed; commands come over SSH only", "err", err)
			return
		}
		switch req.Op {
		case localexec.OpRecycle:
			go s.recycleLocal(c)
			continue
		case localexec.OpPing:
			c.Exit(0, 0)
			c.Close()
			continue
		}
		if req.Op != "" {
			c.Fail("unknown request " + strconv.Quote(req.Op))
			c.Close()
			continue
		}
		go s.execLocal(req, c)
	}
}

// recycleLocal resets the sandbox for berth and answers on c.
func (s *sshd) recycleLocal(c *localexec.Conn) {
	defer c.Close()
	if err := s.recycle("exec socket"); err != nil {
		c.Fail(err.Error())
		return
	}
	c.Exit(0, 0)
}

// askLocal sends op (localexec.OpRecycle, OpPing) to the sandbox behind h
// and waits up to timeout for its answer: Recycle once per job and the
// heartbeat of idle sandboxes without an SSH handshake on either side.
func askLocal(ctx context.Context, h provider.LocalExec, op string, timeout time.Duration) error {
	cmd, err := localexec.Start(h, localexec.Request{Op: op}, nil, nil, nil)
	if err != nil {
		return err
	}
	defer cmd.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer context.AfterFunc(ctx, cmd.Kill)()
	exit, err := cmd.Wait()
	var refused *localexec.StartError
	switch {
	case errors.As(err, &refused):
		return fmt.Errorf("sandbox refused: %s", refused.Message)
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("no answer from the sandbox: %w", ctx.Err())
	case err != nil:
		return err
	case exit.Code != 0:
		return fmt.Errorf("sandbox answered the %s request with status %d", op, exit.Code)
	}
	return nil
}

// execLocal runs one command as session runs an SSH exec request: the same
// environment, /berth, the job namespaces, the image runner for the
// runner's command line, and its process group killed when berth closes
// the connection before the command ended.
func (s *sshd) execLocal(req localexec.Request, c *localexec.Conn) {
	defer c.Close()
	s.track(c, true)
	defer s.track(c, false)
	env := s.baseEnv()
	for _, kv := range req.Env {
		if name, _, ok := strings.Cut(kv, "="); ok && envValid(name) {
			env = append(env, kv)
		}
	}
	argv := []string{"sh", "-c", req.Command}
	start := s.start
	if isRunnerCommand(argv) {
		start = s.startRunner // a job in an image (jobroot_linux.go)
	}
	pgid, done, err := start(c, argv, env)
	if err != nil {
		s.log.Warn("start command", "err", err)
		c.Fail(err.Error())
		return
	}
	var (
		mu     sync.Mutex
		exited bool
	)
	go func() {
		c.Signals(func(sig unix.Signal) {
			mu.Lock()
			defer mu.Unlock()
			if !exited {
				unix.Kill(-pgid, sig)
			}
		})
		// Berth closed its end: nobody can read the output any more.
		mu.Lock()
		defer mu.Unlock()
		if !exited {
			unix.Kill(-pgid, unix.SIGKILL)
		}
	}()
	ws := <-done
	mu.Lock()
	exited = true
	mu.Unlock()
	if ws.Signaled() {
		c.Exit(0, int(ws.Signal()))
	} else {
		c.Exit(ws.ExitStatus(), 0)
	}
}
