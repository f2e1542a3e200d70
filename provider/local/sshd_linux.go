package local

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/internal/quietcopy"
	"github.com/berth-ci/berth/jobroot"
)

// sshd is the sandbox's SSH server: sessions with env, exec and shell
// requests, no pty, no forwarding.
type sshd struct {
	config   *ssh.ServerConfig
	reaper   *reaper
	log      *slog.Logger
	hostname string
	jobs     jobNS
	launcher *imageLauncher // started for the first image job
	notes    *mountNotes    // nil with image_builds or without a listener

	recycling sync.Mutex
	pending   *pending

	// sessions are the open session channels, so that a job killed by the
	// sandbox itself (disk_max) can be told why.
	sessionsMu sync.Mutex
	sessions   map[cmdIO]bool

	// Failed handshakes are logged at most every few seconds, with a
	// count: a flood must not fill the state dir's disk with log lines.
	failMu     sync.Mutex
	failed     int
	failLogged time.Time
}

func (s *sshd) serve(ln net.Listener) error {
	s.pending = &pending{max: maxPendingHandshakes, log: s.log}
	return acceptLoop(ln, s.log, func(c net.Conn) {
		go s.conn(s.pending.admit(c))
	})
}

func (s *sshd) conn(c *pendingConn) {
	// A client that connects and never finishes the handshake must not pin
	// a goroutine and a descriptor for long; the pending table closes it
	// sooner when others are waiting.
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	sc, chans, reqs, err := ssh.NewServerConn(c, s.config)
	s.pending.done(c)
	if err != nil {
		s.handshakeFailed(c, err)
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	defer sc.Close()
	go s.globalRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only session channels are supported")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go s.session(ch, creqs)
	}
}

// handshakeFailed logs a failed SSH handshake, at most one line every 10
// seconds with the count of failures since the last.
func (s *sshd) handshakeFailed(c net.Conn, err error) {
	s.failMu.Lock()
	defer s.failMu.Unlock()
	s.failed++
	if time.Since(s.failLogged) < 10*time.Second {
		return
	}
	s.log.Info("SSH handshake failed", "remote", c.RemoteAddr().String(), "err", err, "failures_since_last_line", s.failed)
	s.failed, s.failLogged = 0, time.Now()
}

// globalRequests answers connection-level requests: recycleRequest resets
// the sandbox; everything else (keepalives) is refused, as
// ssh.DiscardRequests would.
func (s *sshd) globalRequests(reqs <-chan *ssh.Request) {
	for req := range reqs {
		if req.Type == jobroot.BuiltinRequest {
			req.Reply(s.launcher.usable(), nil)
			continue
		}
		if req.Type != recycleRequest {
			if req.WantReply {
				req.Reply(false, nil)
			}
			continue
		}
		if err := s.recycle("ssh"); err != nil {
			req.Reply(false, []byte(err.Error()))
			continue
		}
		req.Reply(true, nil)
	}
}

// recycle resets the sandbox between two jobs, as berth asked over via.
func (s *sshd) recycle(via string) error {
	s.recycling.Lock()
	start := time.Now()
	err := recycle(s.hostname)
	s.recycling.Unlock()
	if err != nil {
		s.log.Error("recycle sandbox", "err", err, "via", via)
		return err
	}
	s.log.Info("sandbox recycled for the next job", "took", time.Since(start).String(), "via", via)
	return nil
}

// track adds or removes an open session channel.
func (s *sshd) track(ch cmdIO, open bool) {
	s.sessionsMu.Lock()
	defer s.sessionsMu.Unlock()
	if s.sessions == nil {
		s.sessions = map[cmdIO]bool{}
	}
	if open {
		s.sessions[ch] = true
	} else {
		delete(s.sessions, ch)
	}
}

// diskOver ends a job that went over disk_max: every open session is told
// why on its stderr (waiting at most a second for clients that do not
// read), then the sandbox is reset as between two jobs, which kills the
// job's processes and frees the space at once.
func (s *sshd) diskOver(why, imageJobs string) {
	msg := []byte(why)
	s.sessionsMu.Lock()
	var wg sync.WaitGroup
	for ch := range s.sessions {
		wg.Add(1)
		go func() { defer wg.Done(); ch.Stderr().Write(msg) }()
	}
	s.sessionsMu.Unlock()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
	s.recycling.Lock()
	defer s.recycling.Unlock()
	// Stop the job first and empty the directories while its sessions
	// are still open: when the client learns the job ended, the space is
	// free already.
	unix.Kill(-1, unix.SIGSTOP)
	// The image launcher writes nothing and must reap the runners the
	// reset kills: stopped, it would hold them as zombies for good.
	if pid := launcherPID.Load(); pid > 0 {
		unix.Kill(int(pid), unix.SIGCONT)
	}
	// The image jobs' directories (their overlays' upper dirs) too: what
	// their stopped processes hold open is freed as the reset kills them,
	// before their sessions end.
	for _, d := range watchedDirs(imageJobs) {
		if err := wipeDir(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Error("empty a directory after disk_max", "dir", d, "err", err)
		}
	}
	if err := recycle(s.hostname); err != nil {
		s.log.Error("reset after disk_max", "err", err)
	}
}

// signals maps SSH signal names (RFC 4254 6.9) to Unix signals.
var signals = map[string]syscall.Signal{
	"ABRT": unix.SIGABRT, "ALRM": unix.SIGALRM, "FPE": unix.SIGFPE,
	"HUP": unix.SIGHUP, "ILL": unix.SIGILL, "INT": unix.SIGINT,
	"KILL": unix.SIGKILL, "PIPE": unix.SIGPIPE, "QUIT": unix.SIGQUIT,
	"SEGV": unix.SIGSEGV, "TERM": unix.SIGTERM, "USR1": unix.SIGUSR1,
	"USR2": unix.SIGUSR2,
}

// session runs one command. The command gets its own process group so that
// a signal request, or the client going away, reaches everything it
// started.
func (s *sshd) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	s.track(ch, true)
	defer s.track(ch, false)
	env := s.baseEnv()
	var (
		mu      sync.Mutex
		pgid    int  // process group of the running command, 0 before start
		exited  bool // the command ended and its output is drained
		started bool
	)
	for req := range reqs {
		ok := false
		switch req.Type {
		case "env":
			var kv struct{ Name, Value string }
			if ssh.Unmarshal(req.Payload, &kv) == nil && envValid(kv.Name) && !started {
				env = append(env, kv.Name+"="+kv.Value)
				ok = true
			}
		case "exec", "shell":
			if started {
				break
			}
			argv := []string{"sh"}
			if req.Type == "exec" {
				var cmd struct{ Command string }
				if ssh.Unmarshal(req.Payload, &cmd) != nil {
					break
				}
				argv = []string{"sh", "-c", cmd.Command}
			}
			start := s.start
			if isRunnerCommand(argv) {
				start = s.startRunner // a job in an image (jobroot_linux.go)
			}
			pid, done, err := start(ch, argv, env)
			if err != nil {
				s.log.Warn("start command", "err", err)
				fmtErr := "berth sandbox: cannot start command: " + err.Error() + "\n"
				ch.Stderr().Write([]byte(fmtErr))
				break
			}
			started = true
			mu.Lock()
			pgid = pid
			mu.Unlock()
			// Reply before the waiter can close the channel: a fast
			// command would otherwise close it before the client got
			// its answer, and the client would see EOF.
			if req.WantReply {
				req.Reply(true, nil)
			}
			go func() {
				ws := <-done
				mu.Lock()
				exited = true
				mu.Unlock()
				if ws.Signaled() {
					name := "KILL"
					for n, sig := range signals {
						if sig == ws.Signal() {
							name = n
						}
					}
					ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
						Signal     string
						CoreDumped bool
						Error, Tag string
					}{Signal: name}))
				} else {
					ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(ws.ExitStatus())}))
				}
				ch.Close()
			}()
			continue
		case "signal":
			var sig struct{ Signal string }
			if ssh.Unmarshal(req.Payload, &sig) == nil {
				mu.Lock()
				if n, known := signals[sig.Signal]; known && pgid > 0 && !exited {
					unix.Kill(-pgid, n)
					ok = true
				}
				mu.Unlock()
			}
		}
		if req.WantReply {
			req.Reply(ok, nil)
		}
	}
	// The channel is closed: either we closed it after the command ended,
	// or the client went away. In the latter case nobody can read the
	// command's output any more, so stop everything it started.
	mu.Lock()
	if pgid > 0 && !exited {
		unix.Kill(-pgid, unix.SIGKILL)
	}
	mu.Unlock()
	ch.Close()
}

// cmdIO is a command's stdio as the client sees it: an SSH session
// channel, or a local exec connection (localexec_linux.go).
type cmdIO interface {
	io.Reader // stdin
	io.Writer // stdout
	Stderr() io.ReadWriter
}

// baseEnv is the environment every command starts with.
func (s *sshd) baseEnv() []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/berth", "USER=root", "LOGNAME=root", "SHELL=/bin/sh",
		"TMPDIR=/tmp", "HOSTNAME=" + s.hostname,
	}
}

// start starts argv in /berth with the channel as stdio. The returned
// channel yields the exit status once the process has ended and its output
// has been copied to the client.
func (s *sshd) start(ch cmdIO, argv, env []string) (int, <-chan unix.WaitStatus, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return 0, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return 0, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return 0, nil, err
	}
	attr := &os.ProcAttr{
		Dir:   "/berth",
		Env:   env,
		Files: []*os.File{inR, outW, errW},
		Sys:   s.jobs.sysProcAttr(),
	}
	pid, wait, err := s.reaper.start("/bin/sh", argv, attr)
	// The kernel frees a user namespace, and gives back its place in the
	// sandbox's quota (userQuotas), a moment after its last process is
	// gone: right after a job that used them all, wait for that.
	for try := 0; errors.Is(err, unix.ENOSPC) && try < 50; try++ {
		time.Sleep(20 * time.Millisecond)
		pid, wait, err = s.reaper.start("/bin/sh", argv, attr)
	}
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return 0, nil, err
	}
	go func() {
		io.Copy(inW, ch)
		inW.Close()
	}()
	var wg sync.WaitGroup
	wg.Add(2)
	// The output streams live as long as the command, mostly idle:
	// quietcopy waits with a small buffer where io.Copy holds 32 KiB.
	go func() { quietcopy.Copy(ch, outR); outR.Close(); wg.Done() }()
	go func() { quietcopy.Copy(ch.Stderr(), errR); errR.Close(); wg.Done() }()
	s.notes.add(pid, ch.Stderr())
	done := make(chan unix.WaitStatus, 1)
	go func() {
		ws := <-wait
		wg.Wait()
		s.notes.remove(pid)
		done <- ws
	}()
	return pid, done, nil
}
