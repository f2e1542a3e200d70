package executor_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/executor"
)

// watchWriter collects output and signals when a marker shows up, so tests
// can act on "the script is running" without sleeping.
type watchWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	seen   chan struct{}
	once   sync.Once
}

func newWatchWriter(marker string) *watchWriter {
	return &watchWriter{marker: marker, seen: make(chan struct{})}
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.marker != "" && strings.Contains(w.buf.String(), w.marker) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestRunStreamsMultiLineScriptOutput(t *testing.T) {
	srv := newTestServer(t)
	out := newWatchWriter("first")
	script := "echo first\necho to-stderr >&2\nfor i in 1 2 3; do echo line $i; done\n# a comment with 'quotes' and $dollars\necho \"done\""

	// The script blocks after its first line until the test has seen that
	// line arrive, which proves output streams instead of arriving at exit.
	gate := t.TempDir() + "/gate"
	script = "echo first\nwhile [ ! -e " + gate + " ]; do sleep 0.01; done\n" + script
	go func() {
		<-out.seen
		if err := writeFile(gate); err != nil {
			t.Error(err)
		}
	}()
	code, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{Script: script, Output: out})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if code != 0 {
		t.Fatalf("exit code = %d, want 0; output:\n%s", code, out.String())
	}
	got := out.String()
	for _, want := range []string{"first\n", "to-stderr\n", "line 1\nline 2\nline 3\n", "done\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

func TestRunScriptStdinIsEmpty(t *testing.T) {
	// A command that reads stdin must not eat the rest of the script.
	srv := newTestServer(t)
	var out bytes.Buffer
	code, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{
		Script: "cat\necho after-cat",
		Output: &out,
	})
	if err != nil || code != 0 {
		t.Fatalf("Run = %d, %v; output:\n%s", code, err, out.String())
	}
	if out.String() != "after-cat\n" {
		t.Fatalf("output = %q, want %q", out.String(), "after-cat\n")
	}
}

func TestRunEnv(t *testing.T) {
	env := []string{"PLAIN=hello", "TRICKY=it's $HOME `x` \"q\"\nline2", "EMPTY="}
	script := `printf '%s|%s|%s|\n' "$PLAIN" "$TRICKY" "${EMPTY-unset}"`
	want := "hello|it's $HOME `x` \"q\"\nline2||\n"

	t.Run("server accepts env requests", func(t *testing.T) {
		srv := newTestServer(t)
		var out bytes.Buffer
		code, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{Script: script, Env: env, Output: &out})
		if err != nil || code != 0 {
			t.Fatalf("Run = %d, %v", code, err)
		}
		if out.String() != want {
			t.Errorf("output = %q, want %q", out.String(), want)
		}
		if got := srv.seenEnv(); len(got) != len(env) {
			t.Errorf("server saw env requests %q, want all of %q", got, env)
		}
	})
	t.Run("server refuses env requests", func(t *testing.T) {
		srv := newTestServer(t, refuseEnv)
		var out bytes.Buffer
		code, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{Script: script, Env: env, Output: &out})
		if err != nil || code != 0 {
			t.Fatalf("Run = %d, %v", code, err)
		}
		if out.String() != want {
			t.Errorf("output = %q, want %q", out.String(), want)
		}
	})
	t.Run("bad name is refused before connecting", func(t *testing.T) {
		srv := newTestServer(t)
		_, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{Script: "true", Env: []string{"1BAD=x"}})
		if !errors.Is(err, executor.ErrInvalidCommand) {
			t.Fatalf("err = %v, want ErrInvalidCommand", err)
		}
	})
}

func TestRunExitCode(t *testing.T) {
	srv := newTestServer(t)
	var out bytes.Buffer
	code, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{Script: "echo failing\nexit 3\necho unreachable", Output: &out})
	if err != nil {
		t.Fatalf("a script failure must not be an error, got %v", err)
	}
	if code != 3 {
		t.Fatalf("exit code = %d, want 3", code)
	}
	if out.String() != "failing\n" {
		t.Errorf("output = %q", out.String())
	}
}

func TestRunExitCodeOfAShellKilledByASignalOpenSSHStyle(t *testing.T) {
	srv := newTestServer(t, signalExit)
	code, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{Script: "kill -TERM $$"})
	if err != nil {
		t.Fatalf("a script killed by a signal must not be an error, got %v", err)
	}
	if code != 128+15 {
		t.Fatalf("exit code = %d, want 143 (128 + SIGTERM)", code)
	}
}

func TestRunAnswersTheServersKeepalivesWhileTheScriptRuns(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "answered")
	srv := newTestServer(t, clientAlive(marker))
	// The script ends only once the server got an answer to its keepalive.
	script := "while [ ! -e " + executor.ShellQuote(marker) + " ]; do sleep 0.01; done; echo answered"
	var out bytes.Buffer
	code, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{Script: script, Output: &out, Timeout: time.Minute})
	if err != nil || code != 0 {
		t.Fatalf("the server's keepalive was not answered while the script ran: code %d, err %v", code, err)
	}
	if out.String() != "answered\n" {
		t.Errorf("output = %q", out.String())
	}
}

func TestRunTimeout(t *testing.T) {
	srv := newTestServer(t)
	out := newWatchWriter("")
	code, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{
		Script:  "echo started\nsleep 30\necho not-reached",
		Output:  out,
		Timeout: 300 * time.Millisecond,
	})
	if !errors.Is(err, executor.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want it to match context.DeadlineExceeded too", err)
	}
	if errors.Is(err, executor.ErrCanceled) {
		t.Errorf("a timeout must not look like a cancel: %v", err)
	}
	if code != -1 {
		t.Errorf("code = %d, want -1", code)
	}
	if !strings.Contains(err.Error(), "inst-test-1") {
		t.Errorf("error %q does not name the instance", err)
	}
	if strings.Contains(out.String(), "not-reached") {
		t.Errorf("script went on after the timeout: %q", out.String())
	}
}

func TestRunCancel(t *testing.T) {
	srv := newTestServer(t)
	out := newWatchWriter("started")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-out.seen
		cancel()
	}()
	code, err := executor.Run(ctx, srv.connectInfo(), executor.Command{Script: "echo started\nsleep 30", Output: out})
	if !errors.Is(err, executor.ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrCanceled wrapping context.Canceled", err)
	}
	if code != -1 {
		t.Errorf("code = %d, want -1", code)
	}
	var sys *executor.SystemError
	if errors.As(err, &sys) {
		t.Errorf("a cancel must not be a system error: %v", err)
	}
}

func TestRunRefusesWrongHostKey(t *testing.T) {
	srv := newTestServer(t)
	ci := srv.connectInfo()
	other, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherPub, err := ssh.NewPublicKey(other)
	if err != nil {
		t.Fatal(err)
	}
	ci.HostKey = string(ssh.MarshalAuthorizedKey(otherPub))
	code, err := executor.Run(context.Background(), ci, executor.Command{Script: "echo should-not-run"})
	var sys *executor.SystemError
	if !errors.As(err, &sys) {
		t.Fatalf("err = %v (%T), want *SystemError", err, err)
	}
	if !errors.Is(err, executor.ErrHostKeyMismatch) {
		t.Errorf("err = %v, want it to match ErrHostKeyMismatch", err)
	}
	if sys.Instance != ci.ID || code != -1 {
		t.Errorf("instance = %q code = %d", sys.Instance, code)
	}
	srv.mu.Lock()
	ran := len(srv.execSeen)
	srv.mu.Unlock()
	if ran != 0 {
		t.Errorf("server ran %d commands despite the wrong host key", ran)
	}

	ci.HostKey = ""
	if _, err := executor.Run(context.Background(), ci, executor.Command{Script: "true"}); !errors.As(err, &sys) {
		t.Errorf("empty host key: err = %v, want *SystemError (never connect unchecked)", err)
	}
}

func TestRunServerKilledMidRun(t *testing.T) {
	srv := newTestServer(t)
	out := newWatchWriter("started")
	go func() {
		<-out.seen
		srv.Kill()
	}()
	code, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{Script: "echo started\nsleep 30", Output: out})
	var sys *executor.SystemError
	if !errors.As(err, &sys) {
		t.Fatalf("err = %v (%T), want *SystemError", err, err)
	}
	if sys.Instance != "inst-test-1" || code != -1 {
		t.Errorf("instance = %q, code = %d", sys.Instance, code)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "instance inst-test-1: connection lost: ") {
		t.Errorf("message %q should start with %q", msg, "instance inst-test-1: connection lost: ")
	}
}

func TestRunInstanceGoesSilent(t *testing.T) {
	// An instance that stops answering without closing TCP is found by
	// keepalive, not left to hang until the job timeout.
	srv := newTestServer(t)
	out := newWatchWriter("started")
	go func() {
		<-out.seen
		srv.Freeze()
	}()
	r := executor.Runner{KeepAliveInterval: 20 * time.Millisecond, KeepAliveTimeout: 200 * time.Millisecond}
	_, err := r.Run(context.Background(), srv.connectInfo(), executor.Command{Script: "echo started\nsleep 30", Output: out})
	var sys *executor.SystemError
	if !errors.As(err, &sys) {
		t.Fatalf("err = %v (%T), want *SystemError", err, err)
	}
	if !strings.Contains(err.Error(), "connection lost") || !strings.Contains(err.Error(), "keepalive") {
		t.Errorf("message %q should say the connection was lost to keepalive", err)
	}
}

func TestRunDialFailure(t *testing.T) {
	srv := newTestServer(t)
	ci := srv.connectInfo()
	srv.Kill()
	_, err := executor.Run(context.Background(), ci, executor.Command{Script: "true"})
	var sys *executor.SystemError
	if !errors.As(err, &sys) {
		t.Fatalf("err = %v (%T), want *SystemError", err, err)
	}
	if !strings.HasPrefix(err.Error(), "instance inst-test-1: dial ") {
		t.Errorf("message %q should say the dial failed", err)
	}
}

func TestOutput(t *testing.T) {
	srv := newTestServer(t)
	out, err := executor.Output(context.Background(), srv.connectInfo(), "echo ready; echo warn >&2", time.Minute)
	if err != nil {
		t.Fatalf("Output: %v", err)
	}
	if !strings.Contains(string(out), "ready\n") || !strings.Contains(string(out), "warn\n") {
		t.Errorf("output = %q", out)
	}

	out, err = executor.Output(context.Background(), srv.connectInfo(), "echo docker not up; exit 7", time.Minute)
	var ee *executor.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("err = %v, want *ExitError", err)
	}
	if ee.Code != 7 || string(out) != "docker not up\n" || !strings.Contains(err.Error(), "docker not up") {
		t.Errorf("ExitError = %+v, out = %q, message %q", ee, out, err)
	}
}

func TestShellQuoteRoundTrip(t *testing.T) {
	srv := newTestServer(t)
	values := []string{"", "a b", "'", "''", `\`, "$(id)", "\n\n", "ünïcødé", "a'b'c"}
	for _, v := range values {
		var out bytes.Buffer
		code, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{
			Script: "printf '%s' " + executor.ShellQuote(v),
			Output: &out,
		})
		if err != nil || code != 0 {
			t.Fatalf("Run(%q) = %d, %v", v, code, err)
		}
		if out.String() != v {
			t.Errorf("ShellQuote(%q) came back as %q", v, out.String())
		}
	}
}

// Output arrives through a small buffer while a job is quiet and a large
// one while it floods; either way every byte arrives, in order.
func TestRunCopiesLargeAndTrickledOutputIntact(t *testing.T) {
	srv := newTestServer(t)
	out := newWatchWriter("")
	// 200,000 numbered lines (about 1.3 MB) in one burst, then a trickle of
	// short lines, then a line exactly as long as the quiet buffer.
	script := "seq 1 200000\nfor i in 1 2 3; do echo tick $i; sleep 0.01; done\nprintf '%0511d\\n' 7"
	code, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{Script: script, Output: out})
	if err != nil || code != 0 {
		t.Fatalf("Run = %d, %v", code, err)
	}
	var want strings.Builder
	for i := 1; i <= 200000; i++ {
		want.WriteString(strconv.Itoa(i))
		want.WriteByte('\n')
	}
	want.WriteString("tick 1\ntick 2\ntick 3\n")
	want.WriteString(strings.Repeat("0", 510) + "7\n")
	if got := out.String(); got != want.String() {
		t.Errorf("output differs: got %d bytes, want %d", len(got), want.Len())
	}
}

// connections counts the SSH connections the server accepted.
func (s *testServer) connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Jobs running on one instance at the same time share one SSH connection,
// each in its own session, and each gets its own output and exit code.
func TestConcurrentCommandsOnOneInstanceShareAConnection(t *testing.T) {
	srv := newTestServer(t)
	runConcurrently(t, srv, 4)
	if n := srv.connections(); n != 1 {
		t.Errorf("4 concurrent commands made %d connections, want 1", n)
	}
	// The connection closed with its last command: the next dials anew.
	if code, err := executor.Run(context.Background(), srv.connectInfo(), executor.Command{Script: "true"}); err != nil || code != 0 {
		t.Fatalf("Run after the shared connection closed = %d, %v", code, err)
	}
}

// A server that allows fewer sessions per connection than commands run
// (OpenSSH's MaxSessions) still runs them all, the rest on connections of
// their own.
func TestCommandsPastTheSessionLimitGetTheirOwnConnection(t *testing.T) {
	srv := newTestServer(t, func(s *testServer) { s.maxSessions = 2 })
	runConcurrently(t, srv, 4)
	if n := srv.connections(); n < 2 {
		t.Errorf("4 concurrent commands with 2 sessions per connection made %d connections, want at least 2", n)
	}
}

// runConcurrently runs n commands on srv through one Runner, all of them
// running at once, and checks each got its own output and exit code.
func runConcurrently(t *testing.T, srv *testServer, n int) {
	t.Helper()
	var r executor.Runner
	gate := t.TempDir() + "/gate"
	var started sync.WaitGroup
	started.Add(n)
	var wg sync.WaitGroup
	for i := range n {
		out := newWatchWriter("started")
		var once sync.Once
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer once.Do(started.Done) // a command that failed early
			script := fmt.Sprintf("echo started %d\nwhile [ ! -e %s ]; do sleep 0.01; done\necho done %d\nexit %d", i, gate, i, i)
			code, err := r.Run(context.Background(), srv.connectInfo(), executor.Command{Script: script, Output: out})
			if err != nil || code != i {
				t.Errorf("command %d: Run = %d, %v; want exit %d", i, code, err, i)
			}
			if want := fmt.Sprintf("started %d\ndone %d\n", i, i); out.String() != want {
				t.Errorf("command %d printed %q, want %q", i, out.String(), want)
			}
		}()
		go func() { <-out.seen; once.Do(started.Done) }()
	}
	started.Wait() // all run at once
	if err := writeFile(gate); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// Canceling one of the commands that share a connection kills that command
// only; the others run to their end.
func TestCancelOneOfTheCommandsSharingAConnection(t *testing.T) {
	srv := newTestServer(t)
	var r executor.Runner
	gate := t.TempDir() + "/gate"
	keep := newWatchWriter("started")
	kill := newWatchWriter("started")
	ctx, cancel := context.WithCancel(context.Background())
	kept := make(chan error, 1)
	go func() {
		code, err := r.Run(context.Background(), srv.connectInfo(), executor.Command{Output: keep,
			Script: "echo started\nwhile [ ! -e " + gate + " ]; do sleep 0.01; done\necho survived"})
		if err == nil && code != 0 {
			err = fmt.Errorf("exit %d", code)
		}
		kept <- err
	}()
	<-keep.seen
	killed := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, srv.connectInfo(), executor.Command{Output: kill, Script: "echo started\nsleep 60"})
		killed <- err
	}()
	<-kill.seen
	cancel()
	if err := <-killed; !errors.Is(err, executor.ErrCanceled) {
		t.Errorf("canceled command: %v, want ErrCanceled", err)
	}
	if err := writeFile(gate); err != nil {
		t.Fatal(err)
	}
	if err := <-kept; err != nil || !strings.Contains(keep.String(), "survived") {
		t.Errorf("the other command on the connection: %v, output %q; want it to run to its end", err, keep.String())
	}
	if n := srv.connections(); n != 1 {
		t.Errorf("%d connections, want the two commands to share 1", n)
	}
}
