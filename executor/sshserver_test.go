package executor_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/provider"
)

// testServer is a small SSH server on 127.0.0.1 that runs exec requests with
// `sh -c` on the test machine, like the built-in server of the local provider.
type testServer struct {
	t         *testing.T
	ln        net.Listener
	hostKey   ssh.Signer
	clientKey []byte // PEM
	refuseEnv bool
	// maxSessions refuses sessions past this many open on one connection,
	// as OpenSSH's MaxSessions does; 0 means no limit.
	maxSessions int
	// signalExit reports a command a signal killed with exit-signal only,
	// as OpenSSH does, instead of exit-status 128+N.
	signalExit bool
	// clientAlive sends an OpenSSH-style keepalive request on the session
	// channel as the command starts and creates this file once the client
	// answered it (OpenSSH with ClientAliveInterval drops clients that do
	// not answer).
	clientAlive string

	mu       sync.Mutex
	conns    []*freezeConn
	procs    []*exec.Cmd
	envSeen  []string
	execSeen []string
	wg       sync.WaitGroup
}

type serverOption func(*testServer)

func refuseEnv(s *testServer) { s.refuseEnv = true }

func signalExit(s *testServer) { s.signalExit = true }

func clientAlive(marker string) serverOption {
	return func(s *testServer) { s.clientAlive = marker }
}

func newTestServer(t *testing.T, opts ...serverOption) *testServer {
	t.Helper()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	clientPub, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	sshClientPub, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{t: t, ln: ln, hostKey: hostSigner, clientKey: pem.EncodeToMemory(block)}
	for _, o := range opts {
		o(s)
	}
	config := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if string(key.Marshal()) == string(sshClientPub.Marshal()) {
				return nil, nil
			}
			return nil, errors.New("unknown client key")
		},
	}
	config.AddHostKey(hostSigner)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fc := &freezeConn{Conn: c, thaw: make(chan struct{})}
			s.mu.Lock()
			s.conns = append(s.conns, fc)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serveConn(fc, config)
			}()
		}
	}()
	t.Cleanup(s.Kill)
	return s
}

// connectInfo describes the server the way a provider would.
func (s *testServer) connectInfo() provider.ConnectInfo {
	return provider.ConnectInfo{
		ID:         "inst-test-1",
		Addr:       s.ln.Addr().String(),
		Username:   "ci",
		HostKey:    string(ssh.MarshalAuthorizedKey(s.hostKey.PublicKey())),
		PrivateKey: s.clientKey,
		OS:         "linux",
	}
}

// Kill stops the server the way a crashed instance would: the listener and
// every connection close and every command dies.
func (s *testServer) Kill() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	for _, p := range s.procs {
		killGroup(p)
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Freeze makes the server stop reading and answering without closing any
// connection, like a VM that lost power.
func (s *testServer) Freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.freeze()
	}
}

func (s *testServer) seenEnv() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.envSeen...)
}

func (s *testServer) serveConn(c net.Conn, config *ssh.ServerConfig) {
	_, chans, reqs, err := ssh.NewServerConn(c, config)
	if err != nil {
		c.Close()
		return
	}
	go ssh.DiscardRequests(reqs)
	var open sync.WaitGroup
	var sessions atomic.Int32
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		if s.maxSessions > 0 && int(sessions.Load()) >= s.maxSessions {
			_ = nc.Reject(ssh.Prohibited, "open failed")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		sessions.Add(1)
		open.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer open.Done()
			defer sessions.Add(-1)
			s.serveSession(ch, chReqs)
		}()
	}
}

func (s *testServer) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var env []string
	var cmd *exec.Cmd
	done := make(chan struct{})
	for {
		select {
		case <-done:
			return
		case req, ok := <-reqs:
			if !ok {
				// The client closed the session: kill what it started.
				if cmd != nil {
					killGroup(cmd)
					<-done
				}
				return
			}
			switch req.Type {
			case "env":
				var kv struct{ Name, Value string }
				if err := ssh.Unmarshal(req.Payload, &kv); err != nil || s.refuseEnv {
					_ = req.Reply(false, nil)
					continue
				}
				env = append(env, kv.Name+"="+kv.Value)
				s.mu.Lock()
				s.envSeen = append(s.envSeen, kv.Name+"="+kv.Value)
				s.mu.Unlock()
				_ = req.Reply(true, nil)
			case "exec":
				var p struct{ Command string }
				if err := ssh.Unmarshal(req.Payload, &p); err != nil || cmd != nil {
					_ = req.Reply(false, nil)
					continue
				}
				cmd = exec.Command("sh", "-c", p.Command)
				cmd.Env = append(os.Environ(), env...)
				cmd.Stdin = ch
				cmd.Stdout = ch
				cmd.Stderr = ch.Stderr()
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				cmd.WaitDelay = time.Second
				if err := cmd.Start(); err != nil {
					_ = req.Reply(false, nil)
					continue
				}
				s.mu.Lock()
				s.procs = append(s.procs, cmd)
				s.execSeen = append(s.execSeen, p.Command)
				s.mu.Unlock()
				_ = req.Reply(true, nil)
				if s.clientAlive != "" {
					go func() {
						if _, err := ch.SendRequest("keepalive@openssh.com", true, nil); err == nil {
							_ = writeFile(s.clientAlive)
						}
					}()
				}
				go func(cmd *exec.Cmd) {
					err := cmd.Wait()
					status := uint32(0)
					var ee *exec.ExitError
					if errors.As(err, &ee) {
						status = uint32(ee.ExitCode())
						if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
							status = 128 + uint32(ws.Signal())
							if s.signalExit {
								_, _ = ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
									Signal     string
									CoreDumped bool
									Error      string
									Lang       string
								}{Signal: strings.TrimPrefix(unix.SignalName(ws.Signal()), "SIG")}))
								_ = ch.CloseWrite()
								close(done)
								return
							}
						}
					}
					_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
					_ = ch.CloseWrite()
					close(done)
				}(cmd)
			case "signal":
				if cmd != nil {
					killGroup(cmd)
				}
				if req.WantReply {
					_ = req.Reply(true, nil)
				}
			default:
				if req.WantReply {
					_ = req.Reply(false, nil)
				}
			}
		}
	}
}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// freezeConn can stop passing bytes in either direction without closing.
type freezeConn struct {
	net.Conn
	once sync.Once
	thaw chan struct{}
	mu   sync.Mutex
	cold bool
}

func (f *freezeConn) freeze() {
	f.mu.Lock()
	f.cold = true
	f.mu.Unlock()
}

func (f *freezeConn) frozen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cold
}

func (f *freezeConn) Read(p []byte) (int, error) {
	n, err := f.Conn.Read(p)
	if f.frozen() {
		<-f.thaw
		return 0, io.EOF
	}
	return n, err
}

func (f *freezeConn) Write(p []byte) (int, error) {
	if f.frozen() {
		<-f.thaw
		return 0, io.ErrClosedPipe
	}
	return f.Conn.Write(p)
}

func (f *freezeConn) Close() error {
	f.once.Do(func() { close(f.thaw) })
	return f.Conn.Close()
}

func writeFile(path string) error { return os.WriteFile(path, nil, 0o600) }
