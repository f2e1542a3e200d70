package gcpfake

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

// sshServer is a fake instance's sshd: public-key logins, sessions with env
// and exec requests, commands run by sh in the instance's home directory.
// It stands in for the machine itself, so it is as small as the provider's
// tests need and no smaller: exit codes, stdout and stderr kept apart.
type sshServer struct {
	lns   []net.Listener
	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startSSH(c *Cloud, in *Instance) (*sshServer, error) {
	home, user := in.home, c.opts.Username
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if c.authorized(meta.User(), key) {
				return nil, nil
			}
			return nil, fmt.Errorf("key %s not authorized for %s", ssh.FingerprintSHA256(key), meta.User())
		},
	}
	cfg.AddHostKey(in.signer)
	s := &sshServer{conns: map[net.Conn]bool{}}
	for _, ip := range []string{in.PrivateIP, in.PublicIP} {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(c.port)))
		if err != nil {
			s.close()
			return nil, err
		}
		s.lns = append(s.lns, ln)
		s.wg.Add(1)
		go s.serve(ln, cfg, home, user)
	}
	return s, nil
}

func (s *sshServer) serve(ln net.Listener, cfg *ssh.ServerConfig, home, user string) {
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

// close stops listening and drops every connection, as a machine that
// stops or terminates does.
func (s *sshServer) close() {
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
