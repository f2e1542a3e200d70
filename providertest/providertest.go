// Package providertest is the conformance suite every berth provider must
// pass, built-in or external. Call Run from a test of the provider's package:
//
//	func TestConformance(t *testing.T) {
//		providertest.Run(t, func(t *testing.T) provider.InstanceGroup { return myprovider.New() },
//			provider.Settings{StateDir: t.TempDir()})
//	}
//
// The suite creates real instances, logs in over SSH with the ConnectInfo the
// provider returns, and deletes everything it created. A provider that
// claims Capabilities.Notify must report every instance that becomes
// running, never before Update lists it so. It polls with
// deadlines and makes no timing assertions, so slow providers pass too; set
// Options.Timeout for very slow ones.
package providertest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/provider"
)

// Options tune the suite. The zero value is fine for most providers.
type Options struct {
	// Timeout bounds each wait for a state change (boot, delete, suspend,
	// resume). Zero means 2 minutes.
	Timeout time.Duration
	// OnFailure, if set, is called when a subtest failed, before the
	// suite deletes the instances it created: the place to log the
	// provider's own diagnostics (instance logs, say).
	OnFailure func(t *testing.T)
}

// Run runs the conformance suite with default options. newGroup returns a
// fresh, uninitialised instance group; the suite calls Init on it with
// settings.
func Run(t *testing.T, newGroup func(t *testing.T) provider.InstanceGroup, settings provider.Settings) {
	RunWithOptions(t, newGroup, settings, Options{})
}

// RunWithOptions is Run with options.
func RunWithOptions(t *testing.T, newGroup func(t *testing.T) provider.InstanceGroup, settings provider.Settings, opts Options) {
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	ctx := context.Background()
	g := newGroup(t)
	info, err := g.Init(ctx, settings)
	if err != nil {
		t.Fatalf("Init: %v", err)
	}
	if info.ID == "" {
		t.Errorf("Init returned an empty Info.ID")
	}
	t.Cleanup(func() {
		if err := g.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	s := &suite{g: g, info: info, timeout: opts.Timeout, onFailure: opts.OnFailure}

	t.Run("BadIDs", s.badIDs)
	t.Run("Lifecycle", s.lifecycle)
	t.Run("Notify", func(t *testing.T) { s.notify(t) })
}

type suite struct {
	g         provider.InstanceGroup
	info      provider.Info
	timeout   time.Duration
	onFailure func(t *testing.T)
}

// list returns the group's current listing.
func (s *suite) list(t *testing.T) map[string]provider.State {
	t.Helper()
	got := map[string]provider.State{}
	err := s.g.Update(context.Background(), func(id string, st provider.State) {
		if !st.Valid() {
			t.Errorf("Update reported instance %s in invalid state %q", id, st)
		}
		if _, dup := got[id]; dup {
			t.Errorf("Update reported instance %s twice", id)
		}
		got[id] = st
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	return got
}

// WaitFor polls Update until cond holds for the listing or the timeout
// passes, and returns the last listing.
func (s *suite) waitFor(t *testing.T, what string, cond func(map[string]provider.State) bool) map[string]provider.State {
	t.Helper()
	deadline := time.Now().Add(s.timeout)
	for {
		l := s.list(t)
		if cond(l) {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; listing: %v", s.timeout, what, l)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *suite) badIDs(t *testing.T) {
	ctx := context.Background()
	for _, id := range []string{"", "no-such-instance", "../../etc", "local-0000000000"} {
		if _, err := s.g.ConnectInfo(ctx, id); err == nil {
			t.Errorf("ConnectInfo(%q) succeeded for an instance that does not exist", id)
		}
		if err := s.g.Heartbeat(ctx, id); err == nil {
			t.Errorf("Heartbeat(%q) succeeded for an instance that does not exist", id)
		}
		// Deleting what is not there may be accepted (idempotent
		// deletes) or refused; it must just not panic or create anything.
		s.g.Decrease(ctx, []string{id})
		if sus, ok := s.g.(provider.Suspender); ok {
			if acc, err := sus.Suspend(ctx, []string{id}); err == nil && len(acc) > 0 {
				t.Errorf("Suspend(%q) accepted an instance that does not exist", id)
			}
			if acc, err := sus.Resume(ctx, []string{id}); err == nil && len(acc) > 0 {
				t.Errorf("Resume(%q) accepted an instance that does not exist", id)
			}
		}
	}
	if n := len(s.list(t)); n != 0 {
		t.Errorf("after calls with bad IDs the group lists %d instances, want 0", n)
	}
}

func (s *suite) lifecycle(t *testing.T) {
	ctx := context.Background()
	before := s.list(t)
	n, err := s.g.Increase(ctx, 2)
	if err != nil || n != 2 {
		t.Fatalf("Increase(2) = %d, %v; want 2, nil", n, err)
	}
	var ids []string
	t.Cleanup(func() {
		if t.Failed() && s.onFailure != nil {
			s.onFailure(t)
		}
		if len(ids) > 0 {
			s.g.Decrease(context.Background(), ids)
		}
	})
	s.waitFor(t, "2 new instances running", func(l map[string]provider.State) bool {
		ids = ids[:0]
		running := 0
		for id, st := range l {
			if _, old := before[id]; old {
				continue
			}
			ids = append(ids, id)
			if st == provider.StateRunning {
				running++
			}
		}
		return running == 2 && len(ids) == 2
	})
	slices.Sort(ids)

	for _, id := range ids {
		ci, err := s.g.ConnectInfo(ctx, id)
		if err != nil {
			t.Fatalf("ConnectInfo(%s): %v", id, err)
		}
		if ci.ID != id || ci.Addr == "" || ci.Username == "" || ci.HostKey == "" || len(ci.PrivateKey) == 0 || ci.OS == "" || ci.Arch == "" {
			t.Errorf("ConnectInfo(%s) is incomplete: %+v", id, redact(ci))
		}
		res, err := Exec(ctx, ci, `echo "out $BERTH_CONFORMANCE"; echo err >&2; exit 3`, map[string]string{"BERTH_CONFORMANCE": "env-ok"})
		if err != nil {
			t.Fatalf("SSH to %s: %v", id, err)
		}
		if res.Stdout != "out env-ok\n" || res.Stderr != "err\n" || res.ExitCode != 3 {
			t.Errorf("command on %s: got stdout %q stderr %q exit %d; want %q %q 3", id, res.Stdout, res.Stderr, res.ExitCode, "out env-ok\n", "err\n")
		}
		if err := s.g.Heartbeat(ctx, id); err != nil {
			t.Errorf("Heartbeat(%s): %v", id, err)
		}
		// A wrong host key must be refused: executors rely on it.
		bad := ci
		bad.HostKey = otherHostKey(t)
		if _, err := Exec(ctx, bad, "true", nil); err == nil {
			t.Errorf("SSH to %s succeeded with the wrong host key", id)
		}
	}

	if sus, ok := s.g.(provider.Suspender); ok && s.info.Capabilities.Suspend {
		s.suspendResume(t, sus, ids[0])
	}

	acc, err := s.g.Decrease(ctx, ids)
	if err != nil {
		t.Fatalf("Decrease(%v): %v", ids, err)
	}
	slices.Sort(acc)
	if !slices.Equal(acc, ids) {
		t.Errorf("Decrease accepted %v, want %v", acc, ids)
	}
	s.waitFor(t, "deleted instances to leave the listing", func(l map[string]provider.State) bool {
		for _, id := range ids {
			if st, ok := l[id]; ok && st != provider.StateDeleted {
				return false
			}
		}
		return true
	})
	if _, err := s.g.Decrease(ctx, ids); err != nil {
		t.Errorf("second Decrease(%v) of deleted instances: %v (deletes must be idempotent)", ids, err)
	}
	ids = nil
}

func (s *suite) suspendResume(t *testing.T, sus provider.Suspender, id string) {
	ctx := context.Background()
	ci, err := s.g.ConnectInfo(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Exec(ctx, ci, `echo kept > "$HOME/berth-conformance.txt"`, nil); err != nil {
		t.Fatalf("write file: %v", err)
	}
	if acc, err := sus.Suspend(ctx, []string{id}); err != nil || len(acc) != 1 {
		t.Fatalf("Suspend(%s) = %v, %v", id, acc, err)
	}
	s.waitFor(t, id+" suspended", func(l map[string]provider.State) bool { return l[id] == provider.StateSuspended })
	if err := s.g.Heartbeat(ctx, id); err == nil {
		t.Errorf("Heartbeat(%s) succeeded on a suspended instance", id)
	}
	if acc, err := sus.Resume(ctx, []string{id}); err != nil || len(acc) != 1 {
		t.Fatalf("Resume(%s) = %v, %v", id, acc, err)
	}
	s.waitFor(t, id+" running after resume", func(l map[string]provider.State) bool { return l[id] == provider.StateRunning })
	ci, err = s.g.ConnectInfo(ctx, id) // the address may change
	if err != nil {
		t.Fatal(err)
	}
	res, err := Exec(ctx, ci, `cat "$HOME/berth-conformance.txt"`, nil)
	if err != nil || res.Stdout != "kept\n" {
		t.Errorf("after resume the file holds %q (err %v), want %q", res.Stdout, err, "kept\n")
	}
}

// Result is the outcome of Exec.
type Result struct {
	Stdout, Stderr string
	ExitCode       int
}

// Dial opens an SSH connection as ConnectInfo describes, refusing any host
// key but ci.HostKey.
func Dial(ctx context.Context, ci provider.ConnectInfo) (*ssh.Client, error) {
	signer, err := ssh.ParsePrivateKey(ci.PrivateKey)
	if err != nil {
		return nil, fmt.Errorf("parse private key of %s: %w", ci.ID, err)
	}
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(ci.HostKey))
	if err != nil {
		return nil, fmt.Errorf("parse host key of %s: %w", ci.ID, err)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ci.Addr)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	sc, chans, reqs, err := ssh.NewClientConn(c, ci.Addr, &ssh.ClientConfig{
		User:            ci.Username,
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(hostKey),
	})
	if err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return ssh.NewClient(sc, chans, reqs), nil
}

// Exec runs cmd on the instance with the given extra environment and
// returns its output and exit code. A non-zero exit is not an error.
func Exec(ctx context.Context, ci provider.ConnectInfo, cmd string, env map[string]string) (Result, error) {
	client, err := Dial(ctx, ci)
	if err != nil {
		return Result{}, fmt.Errorf("ssh to %s at %s: %w", ci.ID, ci.Addr, err)
	}
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		return Result{}, fmt.Errorf("open session on %s: %w", ci.ID, err)
	}
	defer sess.Close()
	for k, v := range env {
		if err := sess.Setenv(k, v); err != nil {
			return Result{}, fmt.Errorf("setenv %s: %w", k, err)
		}
	}
	var out, errb bytes.Buffer
	sess.Stdout, sess.Stderr = &out, &errb
	done := make(chan error, 1)
	go func() { done <- sess.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		client.Close()
		return Result{}, ctx.Err()
	}
	res := Result{Stdout: out.String(), Stderr: errb.String()}
	var exit *ssh.ExitError
	if errors.As(err, &exit) {
		res.ExitCode = exit.ExitStatus()
		err = nil
	}
	if err != nil {
		return res, fmt.Errorf("run command on %s: %w", ci.ID, err)
	}
	return res, nil
}

func otherHostKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

func redact(ci provider.ConnectInfo) provider.ConnectInfo {
	if len(ci.PrivateKey) > 0 {
		ci.PrivateKey = []byte(strings.Repeat("*", 8))
	}
	return ci
}
