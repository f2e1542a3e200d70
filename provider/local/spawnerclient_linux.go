package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/internal/logging"
)

// spawnerTimeout is how long berth waits for the spawner to answer one
// request before it takes the spawner for hung: a clone takes a
// millisecond, so this is only ever reached by a stopped or wedged
// spawner, or a machine so overloaded that nothing works.
var spawnerTimeout = 30 * time.Second

// spawnerMaxFailures is how many spawners may die or hang before berth
// stops starting new ones and forks sandboxes itself.
const spawnerMaxFailures = 3

// spawnerOff is the value of BERTH_LOCAL_SPAWNER that makes berth start
// sandboxes itself (for measuring, or if a spawner ever misbehaves).
const spawnerOff = "off"

// spawner is berth's handle on a running spawner process.
type spawner struct {
	exe   string // the binary it runs: sandboxes start from it
	pid   int
	pidfd int // to kill it without hitting a process that reused its PID
	conn  *net.UnixConn
	done  <-chan struct{} // closed once the spawner process is reaped

	mu sync.Mutex // one request at a time
}

// spawnError is a sandbox the spawner could not start (as exec.Cmd.Start
// would have failed): the spawner itself is fine.
type spawnError struct{ msg string }

func (e *spawnError) Error() string { return "start sandbox: " + e.msg }

// startSpawner starts a spawner from exe.
func startSpawner(exe string) (*spawner, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket pair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "spawner"), os.NewFile(uintptr(fds[1]), "spawner")
	defer theirs.Close()
	defer ours.Close() // FileConn holds its own copy
	cmd := exec.Command(exe)
	cmd.Args = []string{"berth-sandbox-spawner"}
	cmd.Env = []string{spawnerEnv + "=3", "GOMAXPROCS=1"}
	if v, ok := os.LookupEnv("GORACE"); ok {
		cmd.Env = append(cmd.Env, "GORACE="+v)
	}
	cmd.Env = append(cmd.Env, logging.Env()...)
	cmd.Stderr = os.Stderr // a crash of the spawner shows in berth's log
	cmd.ExtraFiles = []*os.File{theirs}
	// Its own session: a Ctrl-C meant for berth's terminal does not kill
	// it (it ends when berth's end of the socket closes).
	cmd.SysProcAttr = &unix.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	// Our unreaped child: its PID is still its own.
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("pidfd_open: %w", err)
	}
	unix.CloseOnExec(pidfd)
	done, err := reapInBackground(cmd)
	if err != nil {
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		unix.Close(pidfd)
		cmd.Wait()
		return nil, err
	}
	c, err := net.FileConn(ours)
	if err != nil {
		unix.PidfdSendSignal(pidfd, unix.SIGKILL, nil, 0)
		unix.Close(pidfd)
		return nil, err
	}
	return &spawner{exe: exe, pid: pid, pidfd: pidfd, conn: c.(*net.UnixConn), done: done}, nil
}

// alive reports whether the spawner process still runs.
func (s *spawner) alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// stop closes berth's end of the socket: the spawner exits; its sandboxes
// go on running. With kill it is killed first (it hung).
func (s *spawner) stop(kill bool) {
	if kill {
		unix.PidfdSendSignal(s.pidfd, unix.SIGKILL, nil, 0)
	}
	unix.Close(s.pidfd)
	s.conn.Close()
}

// spawn asks the spawner to start cmd, which command prepared, exactly as
// cmd.Start would have. It returns the sandbox's PID and pidfd. An error
// other than a *spawnError means the spawner failed: it may or may not
// have started the sandbox.
func (s *spawner) spawn(cmd *exec.Cmd) (int, int, error) {
	logf, ok := cmd.Stdout.(*os.File)
	if !ok {
		return 0, -1, &spawnError{"the sandbox's log is not a file"}
	}
	sys := cmd.SysProcAttr
	req := spawnRequest{
		Args: cmd.Args, Env: cmd.Env, Files: len(cmd.ExtraFiles),
		Cloneflags: sys.Cloneflags, UidMappings: sys.UidMappings, GidMappings: sys.GidMappings,
		Setgroups: sys.GidMappingsEnableSetgroups, Setsid: sys.Setsid, Cgroup: sys.UseCgroupFD,
	}
	if c := sys.Credential; c != nil {
		if c.Uid != 0 || c.Gid != 0 || len(c.Groups) > 0 {
			return 0, -1, &spawnError{"the spawner only makes the sandbox root of its user namespace"}
		}
		req.RootCred = true
	}
	fds := []int{int(logf.Fd())}
	for _, f := range cmd.ExtraFiles {
		fds = append(fds, int(f.Fd()))
	}
	if sys.UseCgroupFD {
		fds = append(fds, sys.CgroupFD)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return 0, -1, &spawnError{err.Error()}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn.SetDeadline(time.Now().Add(spawnerTimeout))
	if _, _, err := s.conn.WriteMsgUnix(b, unix.UnixRights(fds...), nil); err != nil {
		return 0, -1, fmt.Errorf("send to the sandbox spawner: %w", err)
	}
	buf := make([]byte, 1024)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := s.conn.ReadMsgUnix(buf, oob)
	if err == nil && n == 0 {
		err = errors.New("it exited")
	}
	if err != nil {
		return 0, -1, fmt.Errorf("read from the sandbox spawner: %w", err)
	}
	got := receivedFDs(oob[:oobn])
	var reply spawnReply
	if err := json.Unmarshal(buf[:n], &reply); err != nil || (reply.Err == "" && (len(got) != 1 || reply.PID <= 0)) {
		for _, fd := range got {
			unix.Close(fd)
		}
		return 0, -1, fmt.Errorf("bad answer from the sandbox spawner (%d descriptors): %q", len(got), buf[:n])
	}
	if reply.Err != "" {
		for _, fd := range got {
			unix.Close(fd)
		}
		return 0, -1, &spawnError{reply.Err}
	}
	return reply.PID, got[0], nil
}

// spawnerFailureWindow is how long a spawner failure counts towards
// spawnerMaxFailures: three failures in a row of bad luck turn the spawner
// off, three over weeks of running (a spawner killed by hand, an OOM kill)
// do not.
var spawnerFailureWindow = time.Hour

// spawners is the provider's spawner, started on first use.
type spawners struct {
	mu          sync.Mutex
	cur         *spawner
	failures    int       // within spawnerFailureWindow of lastFailure
	lastFailure time.Time // when the last one failed
	off         bool      // berth forks sandboxes itself from now on
}

// spawnerFor returns a running spawner for exe, starting one when there is none
// (or it runs another binary, or died), or nil when berth is to fork
// sandboxes itself.
func (p *Provider) spawnerFor(exe string) *spawner {
	sp := &p.spawners
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.off {
		return nil
	}
	if s := sp.cur; s != nil {
		if s.alive() && s.exe == exe {
			return s
		}
		if !s.alive() {
			p.spawnerLost(s, errors.New("it exited"))
		} else {
			s.stop(false) // the sandbox binary changed
		}
		sp.cur = nil
		if sp.off {
			return nil
		}
	}
	if os.Getenv("BERTH_LOCAL_SPAWNER") == spawnerOff {
		sp.off = true
		p.log.Info("BERTH_LOCAL_SPAWNER=off: berth starts sandboxes itself")
		return nil
	}
	s, err := startSpawner(exe)
	if err != nil {
		sp.off = true
		p.log.Warn("cannot start the sandbox spawner; berth starts sandboxes itself, at ~1 ms more CPU each", "err", err)
		return nil
	}
	p.log.Info("sandbox spawner started", "pid", s.pid, "binary", exe)
	sp.cur = s
	return s
}

// spawnerLost counts a spawner that died or hung; the caller holds
// p.spawners.mu.
func (p *Provider) spawnerLost(s *spawner, why error) {
	sp := &p.spawners
	if time.Since(sp.lastFailure) > spawnerFailureWindow {
		sp.failures = 0
	}
	sp.failures++
	sp.lastFailure = time.Now()
	s.stop(true)
	if sp.failures >= spawnerMaxFailures {
		sp.off = true
		p.log.Warn("the sandbox spawner failed again; berth starts sandboxes itself from now on", "pid", s.pid, "failures", sp.failures, "err", why)
		return
	}
	p.log.Warn("the sandbox spawner failed; the next sandbox starts a new one", "pid", s.pid, "failures", sp.failures, "err", why)
}

// startSandbox starts cmd, which command prepared, through the spawner
// when one runs, else itself. It returns the sandbox's PID and a channel
// closed once the sandbox has exited. Either way the sandbox's pidfd is
// watched by the shared reaper, without a thread per sandbox.
func (p *Provider) startSandbox(cmd *exec.Cmd) (int, <-chan struct{}, error) {
	if s := p.spawnerFor(cmd.Path); s != nil {
		pid, pidfd, err := s.spawn(cmd)
		var se *spawnError
		switch {
		case err == nil:
			done, err := reapPidfd(pidfd)
			if err != nil {
				unix.Kill(pid, unix.SIGKILL)
				return 0, nil, err
			}
			return pid, done, nil
		case errors.As(err, &se):
			return 0, nil, err
		}
		// The spawner died or hung, maybe after starting the sandbox:
		// this sandbox fails (its cgroup, killed by the caller's
		// cleanup, takes any process along); the next one gets a new
		// spawner.
		p.spawners.mu.Lock()
		if p.spawners.cur == s {
			p.spawnerLost(s, err)
			p.spawners.cur = nil
		}
		p.spawners.mu.Unlock()
		return 0, nil, err
	}
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	// Reap the sandbox if it dies while we run (without a thread per
	// sandbox); after a berth restart the init process (or a subreaper)
	// does that.
	pid := cmd.Process.Pid
	done, err := reapInBackground(cmd)
	if err != nil {
		// A kernel without pidfds (before 5.3): a blocking wait, which
		// costs a thread per sandbox but works.
		p.log.Warn("cannot wait for the sandbox through a pidfd; waiting with a thread of its own", "pid", pid, "err", err)
		ch := make(chan struct{})
		go func() { cmd.Wait(); close(ch) }()
		done = ch
	}
	return pid, done, nil
}

// stopSpawner lets the spawner exit (Shutdown); sandboxes keep running.
func (p *Provider) stopSpawner() {
	sp := &p.spawners
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.cur != nil {
		sp.cur.stop(false)
		sp.cur = nil
	}
}

// spawnerPID returns the PID of the running spawner, 0 when none (tests).
func (p *Provider) spawnerPID() int {
	sp := &p.spawners
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.cur == nil || !sp.cur.alive() {
		return 0
	}
	return sp.cur.pid
}
