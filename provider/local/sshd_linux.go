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
)

// sshd is the sandbox's SSH server: sessions with env, exec and shell
// requests, no pty, no forwarding.
type sshd struct {
	config   *ssh.ServerConfig
	reaper   *reaper
	log      *slog.Logger
	hostname string
	jobs     jobNS

	recycling sync.Mutex
}

func (s *sshd) serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		go s.conn(c)
	}
}

func (s *sshd) conn(c net.Conn) {
	// A client that connects and never finishes the handshake must not pin
	// a goroutine for ever.
	c.SetDeadline(time.Now().Add(30 * time.Second))
	sc, chans, reqs, err := ssh.NewServerConn(c, s.config)
	if err != nil {
		s.log.Info("SSH handshake failed", "remote", c.RemoteAddr().String(), "err", err)
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

// globalRequests answers connection-level requests: recycleRequest resets
// the sandbox; everything else (keepalives) is refused, as
// ssh.DiscardRequests would.
func (s *sshd) globalRequests(reqs <-chan *ssh.Request) {
	for req := range reqs {
		if req.Type != recycleRequest {
			if req.WantReply {
				req.Reply(false, nil)
			}
			continue
		}
		s.recycling.Lock()
		start := time.Now()
		err := recycle(s.hostname)
		s.recycling.Unlock()
		if err != nil {
			s.log.Error("recycle sandbox", "err", err)
			req.Reply(false, []byte(err.Error()))
			continue
		}
		s.log.Info("sandbox recycled for the next job", "took", time.Since(start).String())
		req.Reply(true, nil)
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
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/berth", "USER=root", "LOGNAME=root", "SHELL=/bin/sh",
		"TMPDIR=/tmp", "HOSTNAME=" + s.hostname,
	}
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
			pid, done, err := s.start(ch, argv, env)
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

// start starts argv in /berth with the channel as stdio. The returned
// channel yields the exit status once the process has ended and its output
// has been copied to the client.
func (s *sshd) start(ch ssh.Channel, argv, env []string) (int, <-chan unix.WaitStatus, error) {
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
	pid, wait, err := s.reaper.start("/bin/sh", argv, &os.ProcAttr{
		Dir:   "/berth",
		Env:   env,
		Files: []*os.File{inR, outW, errW},
		Sys:   s.jobs.sysProcAttr(),
	})
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
	done := make(chan unix.WaitStatus, 1)
	go func() {
		ws := <-wait
		wg.Wait()
		done <- ws
	}()
	return pid, done, nil
}
