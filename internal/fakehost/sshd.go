// Package fakehost is the sshd of the cloud fakes' instances (awsfake,
// gcpfake, azurefake): each fake instance is a real SSH host on this
// machine, so that berth's executor, conformance kit and e2e tests talk to
// it as to a cloud VM.
package fakehost

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"

	"golang.org/x/crypto/ssh"
)

// Server is a fake instance's sshd: public-key logins, sessions with env
// and exec requests, commands run by sh in the instance's home directory.
// It stands in for the machine itself, so it is as small as the providers'
// tests need and no smaller: exit codes, stdout and stderr kept apart.
type Server struct {
	lns   []net.Listener
	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// Host is what a fake cloud knows of one instance for its sshd.
type Host struct {
	// Addrs are the addresses it listens on (private and public IP).
	Addrs []string
	// Port is the SSH port on every address.
	Port int
	// HostKey is the instance's host key.
	HostKey ssh.Signer
	// Home is the login's home and the commands' working directory.
	Home string
	// User is USER in the commands' environment.
	User string
	// Authorized says whether key may log in as user.
	Authorized func(user string, key ssh.PublicKey) bool
}

// Start serves SSH for h on each of its addresses until Close.
func Start(h Host) (*Server, error) {
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if h.Authorized(meta.User(), key) {
				return nil, nil
			}
			return nil, fmt.Errorf("key %s not authorized for %s", ssh.FingerprintSHA256(key), meta.User())
		},
	}
	cfg.AddHostKey(h.HostKey)
	s := &Server{conns: map[net.Conn]bool{}}
	for _, ip := range h.Addrs {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(h.Port)))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.lns = append(s.lns, ln)
		s.wg.Add(1)
		go s.serve(ln, cfg, h.Home, h.User)
	}
	return s, nil
}

func (s *Server) serve(ln net.Listener, cfg *ssh.ServerConfig, home, user string) {
	defer s.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[nc] = true
		s.mu.Unlock()
		go func() {
			defer func() {
				s.mu.Lock()
				delete(s.conns, nc)
				s.mu.Unlock()
				nc.Close()
			}()
			sc, chans, reqs, err := ssh.NewServerConn(nc, cfg)
			if err != nil {
				return
			}
			defer sc.Close()
			go ssh.DiscardRequests(reqs)
			for ch := range chans {
				if ch.ChannelType() != "session" {
					ch.Reject(ssh.UnknownChannelType, "session only")
					continue
				}
				go session(ch, home, user)
			}
		}()
	}
}

// Close stops listening and drops every connection, as a machine that
// stops or terminates does.
func (s *Server) Close() {
	for _, ln := range s.lns {
		ln.Close()
	}
	s.mu.Lock()
	for nc := range s.conns {
		nc.Close()
	}
	s.mu.Unlock()
}

func session(nc ssh.NewChannel, home, user string) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "USER=" + user}
	for req := range reqs {
		switch req.Type {
		case "env":
			var kv struct{ K, V string }
			if ssh.Unmarshal(req.Payload, &kv) != nil {
				req.Reply(false, nil)
				continue
			}
			env = append(env, kv.K+"="+kv.V)
			req.Reply(true, nil)
		case "exec":
			var cmd struct{ C string }
			if ssh.Unmarshal(req.Payload, &cmd) != nil {
				req.Reply(false, nil)
				continue
			}
			req.Reply(true, nil)
			code := run(ch, cmd.C, env, home)
			status := make([]byte, 4)
			binary.BigEndian.PutUint32(status, uint32(code))
			ch.SendRequest("exit-status", false, status)
			return
		default:
			req.Reply(false, nil)
		}
	}
}

func run(ch ssh.Channel, command string, env []string, home string) int {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Env, cmd.Dir = env, home
	cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
	// stdin is the channel, as with a real sshd: executors send scripts
	// that way. Through a pipe, so that a client that never sends EOF does
	// not keep Wait from returning once the command exited.
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err == nil {
		go func() {
			io.Copy(stdin, ch)
			stdin.Close()
		}()
		err = cmd.Wait()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		fmt.Fprintf(ch.Stderr(), "sh: %v\n", err)
		return 127
	}
	return 0
}
