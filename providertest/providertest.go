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
// running, never before Update lists it so; one that claims
// Capabilities.Recycle must leave nothing of one login's processes and
// files to the next after Recycle. It polls with
// deadlines and makes no timing assertions, so slow providers pass too; set
// Options.Timeout for very slow ones.
//
// Check runs the same checks outside `go test` and reports each by name;
// `berth provider test PATH` uses it on plugin binaries.
package providertest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/provider"
)

// Options tune the suite. The zero value is fine for most providers.
type Options struct {
	// Timeout bounds each wait for a state change (boot, delete, suspend,
	// resume). Zero means 2 minutes.
	Timeout time.Duration
	// OnFailure, if set, is called by Run when a check failed, before the
	// suite deletes the instances it created: the place to log the
	// provider's own diagnostics (instance logs, say).
	OnFailure func(t *testing.T)
	// SkipSSH skips the checks that log in to instances, for simulated
	// providers whose instances run no SSH server. They are reported as
	// skipped, never as passed.
	SkipSSH bool
}

// T is the part of *testing.T the checks use, so the suite also runs
// outside `go test` (see Check). Fatalf must not return.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Failed() bool
}

// check is one named step of the suite. Steps run in order on one group;
// a step that needs instances is skipped once an earlier one failed to
// provide them.
type check struct {
	name      string
	needsIDs  bool // needs the instances Increase created
	needsSSH  bool
	needsSusp bool
	needsNote bool // only for providers that claim Capabilities.Notify
	needsRecy bool // only for providers that claim Capabilities.Recycle
	run       func(s *suite, t T)
}

var checks = []check{
	{name: "BadIDs", run: (*suite).badIDs},
	{name: "Increase", run: (*suite).increase},
	{name: "ConnectInfo", needsIDs: true, run: (*suite).connectInfo},
	{name: "SSH", needsIDs: true, needsSSH: true, run: (*suite).ssh},
	{name: "WrongHostKeyRefused", needsIDs: true, needsSSH: true, run: (*suite).wrongHostKey},
	{name: "Heartbeat", needsIDs: true, run: (*suite).heartbeat},
	{name: "Recycle", needsIDs: true, needsSSH: true, needsRecy: true, run: (*suite).recycle},
	{name: "SuspendResume", needsIDs: true, needsSusp: true, run: (*suite).suspendResume},
	{name: "Notify", needsNote: true, run: (*suite).notify},
	{name: "Decrease", needsIDs: true, run: (*suite).decrease},
	{name: "DecreaseIdempotent", needsIDs: true, run: (*suite).decreaseAgain},
}

// CheckNames lists the suite's checks in the order they run, after "Init"
// and before "Shutdown".
func CheckNames() []string {
	names := make([]string, len(checks))
	for i, c := range checks {
		names[i] = c.name
	}
	return names
}

// skipReason says why c does not run now, or "".
func (s *suite) skipReason(c check, opts Options) string {
	switch {
	case c.needsSSH && opts.SkipSSH:
		return "SSH checks skipped (SkipSSH)"
	case c.needsSusp && !s.canSuspend():
		return "the provider has no suspend capability"
	case c.needsNote && !s.info.Capabilities.Notify:
		return "the provider does not claim the notify capability"
	case c.needsRecy && !s.info.Capabilities.Recycle:
		return "the provider does not claim the recycle capability"
	case c.needsIDs && len(s.ids) == 0:
		return "no instances: Increase failed"
	}
	return ""
}

func (s *suite) canSuspend() bool {
	_, ok := s.g.(provider.Suspender)
	return ok && s.info.Capabilities.Suspend
}

// Run runs the conformance suite with default options. newGroup returns a
// fresh, uninitialised instance group; the suite calls Init on it with
// settings.
func Run(t *testing.T, newGroup func(t *testing.T) provider.InstanceGroup, settings provider.Settings) {
	RunWithOptions(t, newGroup, settings, Options{})
}

// RunWithOptions is Run with options. Each check is a subtest.
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
	s := &suite{g: g, info: info, timeout: opts.Timeout, skipSSH: opts.SkipSSH}
	t.Cleanup(func() {
		if t.Failed() && opts.OnFailure != nil {
			opts.OnFailure(t)
		}
		s.cleanup()
		if err := g.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if why := s.skipReason(c, opts); why != "" {
				t.Skip(why)
			}
			c.run(s, t)
		})
	}
}

// Status is the outcome of one check.
type Status string

// Outcomes of a check.
const (
	Pass Status = "pass"
	Fail Status = "fail"
	Skip Status = "skip"
)

// CheckResult is the outcome of one check run by Check.
type CheckResult struct {
	// Name names the check, e.g. "Decrease".
	Name string
	// Status is pass, fail or skip.
	Status Status
	// Messages are what the check reported: failures, or why it was skipped.
	Messages []string
	// Duration is how long the check took.
	Duration time.Duration
}

// Check runs the suite on g outside `go test` and returns one result per
// check, "Init" first and "Shutdown" last; report, if set, sees each result
// as soon as it is known. The suite passed when no result is Fail.
func Check(ctx context.Context, g provider.InstanceGroup, settings provider.Settings, opts Options, report func(CheckResult)) []CheckResult {
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Minute
	}
	if report == nil {
		report = func(CheckResult) {}
	}
	var results []CheckResult
	add := func(r CheckResult) {
		results = append(results, r)
		report(r)
	}
	s := &suite{g: g, timeout: opts.Timeout, skipSSH: opts.SkipSSH}
	add(runOne("Init", func(t T) {
		info, err := g.Init(ctx, settings)
		if err != nil {
			t.Fatalf("Init: %v", err)
		}
		if info.ID == "" {
			t.Errorf("Init returned an empty Info.ID")
		}
		s.info = info
	}))
	if results[0].Status == Fail {
		return results
	}
	for _, c := range checks {
		if why := s.skipReason(c, opts); why != "" {
			add(CheckResult{Name: c.name, Status: Skip, Messages: []string{why}})
			continue
		}
		add(runOne(c.name, func(t T) { c.run(s, t) }))
	}
	s.cleanup()
	add(runOne("Shutdown", func(t T) {
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}))
	return results
}

// recorder is a T that records instead of failing a test.
type recorder struct {
	mu     sync.Mutex
	msgs   []string
	failed bool
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

// runOne runs fn on its own goroutine, so Fatalf can end it, and turns a
// panic of the provider into a failure of the check.
func runOne(name string, fn func(t T)) CheckResult {
	r := &recorder{}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				r.Errorf("panic: %v", p)
			}
		}()
		fn(r)
	}()
	<-done
	res := CheckResult{Name: name, Status: Pass, Messages: r.msgs, Duration: time.Since(start)}
	if r.failed {
		res.Status = Fail
	}
	return res
}

type suite struct {
	g       provider.InstanceGroup
	info    provider.Info
	timeout time.Duration
	ids     []string // instances the suite created and has not deleted
	skipSSH bool
}

// cleanup deletes what the suite created and still holds.
func (s *suite) cleanup() {
	if len(s.ids) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		s.g.Decrease(ctx, s.ids)
		s.ids = nil
	}
}

// list returns the group's current listing.
func (s *suite) list(t T) map[string]provider.State {
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

// waitFor polls Update until cond holds for the listing or the timeout
// passes, and returns the last listing.
func (s *suite) waitFor(t T, what string, cond func(map[string]provider.State) bool) map[string]provider.State {
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

func (s *suite) badIDs(t T) {
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

func (s *suite) increase(t T) {
	ctx := context.Background()
	before := s.list(t)
	n, err := s.g.Increase(ctx, 2)
	var ids []string
	defer func() { slices.Sort(ids); s.ids = ids }() // even on failure: cleanup deletes them
	if err != nil || n != 2 {
		t.Fatalf("Increase(2) = %d, %v; want 2, nil", n, err)
	}
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
}

func (s *suite) connectInfo(t T) {
	for _, id := range s.ids {
		ci, err := s.g.ConnectInfo(context.Background(), id)
		if err != nil {
			t.Fatalf("ConnectInfo(%s): %v", id, err)
		}
		// A simulation (SkipSSH) has no key to log in with.
		if ci.ID != id || ci.Addr == "" || ci.Username == "" || ci.OS == "" || ci.Arch == "" || (len(ci.PrivateKey) == 0 && !s.skipSSH) {
			t.Errorf("ConnectInfo(%s) is incomplete: %+v", id, redact(ci))
		}
	}
}

func (s *suite) ssh(t T) {
	ctx := context.Background()
	for _, id := range s.ids {
		ci, err := s.g.ConnectInfo(ctx, id)
		if err != nil {
			t.Fatalf("ConnectInfo(%s): %v", id, err)
		}
		if ci.HostKey == "" {
			t.Errorf("ConnectInfo(%s) has no host key; berth then trusts the first key it sees (trust on first use)", id)
			continue
		}
		res, err := Exec(ctx, ci, `echo "out $BERTH_CONFORMANCE"; echo err >&2; exit 3`, map[string]string{"BERTH_CONFORMANCE": "env-ok"})
		if err != nil {
			t.Fatalf("SSH to %s: %v", id, err)
		}
		if res.Stdout != "out env-ok\n" || res.Stderr != "err\n" || res.ExitCode != 3 {
			t.Errorf("command on %s: got stdout %q stderr %q exit %d; want %q %q 3", id, res.Stdout, res.Stderr, res.ExitCode, "out env-ok\n", "err\n")
		}
	}
}

// wrongHostKey checks that a wrong host key is refused: executors rely on it.
func (s *suite) wrongHostKey(t T) {
	for _, id := range s.ids {
		ci, err := s.g.ConnectInfo(context.Background(), id)
		if err != nil {
			t.Fatalf("ConnectInfo(%s): %v", id, err)
		}
		ci.HostKey = otherHostKey(t)
		if _, err := Exec(context.Background(), ci, "true", nil); err == nil {
			t.Errorf("SSH to %s succeeded with the wrong host key", id)
		}
	}
}

func (s *suite) heartbeat(t T) {
	for _, id := range s.ids {
		if err := s.g.Heartbeat(context.Background(), id); err != nil {
			t.Errorf("Heartbeat(%s): %v", id, err)
		}
	}
}

func (s *suite) decrease(t T) {
	ctx := context.Background()
	ids := s.ids
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
}

func (s *suite) decreaseAgain(t T) {
	if _, err := s.g.Decrease(context.Background(), s.ids); err != nil {
		t.Errorf("second Decrease(%v) of deleted instances: %v (deletes must be idempotent)", s.ids, err)
	}
	s.ids = nil
}

func (s *suite) suspendResume(t T) {
	sus := s.g.(provider.Suspender)
	ctx := context.Background()
	id := s.ids[0]
	ci, err := s.g.ConnectInfo(ctx, id)
	if err != nil {
		t.Fatalf("ConnectInfo(%s): %v", id, err)
	}
	canSSH := !s.skipSSH
	if canSSH {
		if _, err := Exec(ctx, ci, `echo kept > "$HOME/berth-conformance.txt"`, nil); err != nil {
			t.Fatalf("write file: %v", err)
		}
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
	if !canSSH {
		return
	}
	ci, err = s.g.ConnectInfo(ctx, id) // the address may change
	if err != nil {
		t.Fatalf("ConnectInfo(%s) after resume: %v", id, err)
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
// returns its output and exit code. A non-zero exit is not an error. The
// environment is exported at the start of the command, so it arrives
// whatever the server's AcceptEnv says.
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
	// Exported in the command, as the executor does, rather than sent as
	// SSH env requests: stock OpenSSH refuses those (AcceptEnv is empty by
	// default), and a provider must not be failed for a server berth copes with.
	cmd = exports(env) + cmd
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

// exports renders env as shell exports, in a stable order. Names must be
// shell identifiers; the suite's own are.
func exports(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString("export " + k + "=" + executor.ShellQuote(env[k]) + "\n")
	}
	return b.String()
}

func otherHostKey(t T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatalf("%v", err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

func redact(ci provider.ConnectInfo) provider.ConnectInfo {
	if len(ci.PrivateKey) > 0 {
		ci.PrivateKey = []byte(strings.Repeat("*", 8))
	}
	return ci
}
