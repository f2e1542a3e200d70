// Package executor runs a job's script on an instance over SSH and maps how
// it ended onto what the manager must tell the job source: the script's exit
// code, or a typed error for a system failure, a timeout or a cancellation.
//
// The split matters to users: a non-zero exit is the script's fault and is
// returned as a plain exit code, while a lost instance, a refused connection
// or a host key that does not match is berth's or the provider's fault and
// comes back as *SystemError naming the instance and the cause, so the job
// can be reported as a system failure and the instance looked at.
//
// # How the script runs
//
// The script is sent on the session's stdin to a fixed wrapper,
//
//	sh -c 'exec 2>&1 && script=$(cat) && exec </dev/null && eval "$script"'
//
// which reads the whole script before running any of it. That gives
// multi-line scripts of any size (no ARG_MAX limit, no quoting through the
// login shell) while the script itself sees an empty stdin, so a command in it
// that reads stdin (apt-get, ssh, cat) cannot swallow the rest of the script
// as it would with a plain `sh -s`. The instance needs a POSIX sh on PATH.
//
// Environment variables are sent as SSH "env" requests and also exported at
// the top of the script, because most sshd configurations (AcceptEnv) refuse
// env requests; the exports make them arrive either way.
//
// Standard error is the same pipe as standard output (the wrapper's
// `exec 2>&1`), so the log is one stream in the order the job wrote it,
// as GitLab Runner gives GitLab: two streams copied apart (an SSH
// session's stdout and stderr, each with its own copier at both ends)
// would put a job's error before the output that led to it.
//
// # Stopping
//
// On timeout or cancellation the executor sends signal KILL, closes the
// session and the connection (unless other commands share it: then only if
// the session does not end within 10 s), and waits until no more output can
// reach the writer before it returns.
//
// # Connections
//
// The commands a Runner runs on one instance at the same time share one SSH
// connection, each in its own session (see conn.go for why and for the
// server's session limit); the connection closes with its last command. Whether the remote processes die with the
// session is up to the SSH server; berth's own servers kill them.
//
// # Local sandboxes
//
// When the provider sets ConnectInfo.Local (the local provider, for
// sandboxes this process started) commands go to the sandbox's init
// process through package localexec instead of SSH (local.go); everything
// above holds the same, through the command seam in transport.go.
package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/berth-ci/berth/internal/quietcopy"
	"github.com/berth-ci/berth/provider"
)

// Errors callers branch on with errors.Is. Timeout and cancellation errors
// also match the context error that caused them.
var (
	// ErrTimeout: the command ran longer than Command.Timeout or past the
	// caller's context deadline, and was killed.
	ErrTimeout = errors.New("job timed out")
	// ErrCanceled: the caller canceled the context and the command was killed.
	ErrCanceled = errors.New("job canceled")
	// ErrHostKeyMismatch: the server presented a host key other than the one
	// the provider reported. It comes wrapped in a *SystemError.
	ErrHostKeyMismatch = errors.New("host key mismatch")
	// ErrInvalidCommand: the Command itself is unusable (a bad env name); no
	// connection was made.
	ErrInvalidCommand = errors.New("invalid command")
)

// SystemError reports that the command could not run to an exit because of
// the instance or the connection to it, not because of the script: the dial
// failed, the handshake failed, the host key did not match, or the connection
// was lost mid-run.
type SystemError struct {
	// Instance is the ID of the instance (ConnectInfo.ID).
	Instance string
	// Op is what failed, e.g. "dial 10.0.0.5:22" or "connection lost".
	Op string
	// Err is the cause.
	Err error
}

// Error reads "instance ID: OP: CAUSE".
func (e *SystemError) Error() string {
	return fmt.Sprintf("instance %s: %s: %v", e.Instance, e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *SystemError) Unwrap() error { return e.Err }

// ExitError is returned by Output when the command exited non-zero. Run
// never returns it: for a job, a non-zero exit is a result, not an error.
type ExitError struct {
	// Instance is the ID of the instance.
	Instance string
	// Code is the exit code (128+N when killed by signal N).
	Code int
	// Output is the command's combined output, truncated to OutputLimit.
	Output []byte
}

// Error includes the tail of the output, since that usually says why.
func (e *ExitError) Error() string {
	out := strings.TrimSpace(string(e.Output))
	if len(out) > 512 {
		out = "..." + out[len(out)-512:]
	}
	if out == "" {
		return fmt.Sprintf("instance %s: command exited with code %d and printed nothing", e.Instance, e.Code)
	}
	return fmt.Sprintf("instance %s: command exited with code %d: %s", e.Instance, e.Code, out)
}

// Command is one script to run.
type Command struct {
	// Script is shell source for sh; it may span many lines. Exit status is
	// that of the script, so `set -e` is the script's own choice.
	Script string
	// Env holds KEY=VALUE pairs. Names must be shell identifiers.
	Env []string
	// Output receives stdout and stderr as they arrive; nil discards them.
	// Writes are serialized. If it returns an error, later output is
	// dropped and the error logged, but the command still runs to its end:
	// a full log disk should not kill a build.
	Output io.Writer
	// Timeout kills the command after this long, counted from the start of
	// Run (the connection time counts); 0 means only ctx bounds it.
	Timeout time.Duration

	// remote replaces the fixed wrapper command and stdin, when set,
	// replaces the script input (see image.go).
	remote string
	stdin  io.Reader
}

// Defaults used by a zero Runner (see the Runner fields of the same names).
const (
	DefaultDialTimeout       = 30 * time.Second
	DefaultKeepAliveInterval = 15 * time.Second
	DefaultKeepAliveTimeout  = 45 * time.Second
	// OutputLimit bounds what Output keeps; a ready check has no use for
	// megabytes of output and the daemon should not hold them.
	OutputLimit = 64 << 10
)

// Runner runs commands over SSH. The zero value is ready to use with the
// defaults above; a Runner is safe for concurrent use.
type Runner struct {
	// DialTimeout bounds the TCP connect and the SSH handshake together.
	DialTimeout time.Duration
	// KeepAliveInterval is how often a keepalive request is sent while a
	// command runs. Without it an instance that vanishes without closing
	// the TCP connection (a VM powered off) would hang the job until its
	// timeout.
	KeepAliveInterval time.Duration
	// KeepAliveTimeout is how long a keepalive may go unanswered before the
	// connection is declared lost.
	KeepAliveTimeout time.Duration
	// Logger receives diagnostics; nil means slog.Default().
	Logger *slog.Logger

	pool connPool
}

// Run runs cmd on the instance ci describes, with a zero Runner.
func Run(ctx context.Context, ci provider.ConnectInfo, cmd Command) (exitCode int, err error) {
	var r Runner
	return r.Run(ctx, ci, cmd)
}

// Output runs a short script (such as instance_ready_command) with a zero
// Runner and returns its combined output.
func Output(ctx context.Context, ci provider.ConnectInfo, script string, timeout time.Duration) ([]byte, error) {
	var r Runner
	return r.Output(ctx, ci, script, timeout)
}

// Run connects to ci.Addr, checks that the server's host key is ci.HostKey,
// runs cmd and returns the script's exit code.
//
// The outcomes, and how to tell them apart:
//   - the script exited: (code, nil), whatever the code; 128+N when a signal N
//     killed the shell;
//   - dial, handshake, host key or connection failure: (-1, *SystemError);
//   - cmd.Timeout or ctx's deadline passed: (-1, err) with errors.Is(err, ErrTimeout);
//   - ctx canceled: (-1, err) with errors.Is(err, ErrCanceled);
//   - bad Command: (-1, err) with errors.Is(err, ErrInvalidCommand).
//
// Run returns only once nothing more will be written to cmd.Output.
func (r *Runner) Run(ctx context.Context, ci provider.ConnectInfo, cmd Command) (exitCode int, err error) {
	return r.Start(ctx, ci, cmd).Wait()
}

// openSession opens a session on a connection to ci (see conn.go). A
// shared connection that refuses the session (the server's session limit,
// or it died meanwhile) is left to its other users, and the session is
// opened on a connection of its own.
func (r *Runner) openSession(ctx context.Context, ci provider.ConnectInfo) (*conn, *session, error) {
	c, err := r.acquire(ctx, ci)
	if err != nil {
		return nil, nil, err
	}
	sess, err := c.client.NewSession()
	if err == nil {
		return c, sess, nil
	}
	shared := r.shared(c)
	if !shared {
		r.release(c)
		return nil, nil, &SystemError{Instance: ci.ID, Op: "open session", Err: err}
	}
	r.logger().Info("instance refused another session on its shared SSH connection; using a connection of the job's own",
		"instance", ci.ID, "err", err)
	r.forget(c)
	r.release(c)
	if c, err = r.dialAlone(ctx, ci); err != nil {
		return nil, nil, err
	}
	if sess, err = c.client.NewSession(); err != nil {
		r.release(c)
		return nil, nil, &SystemError{Instance: ci.ID, Op: "open session", Err: err}
	}
	return c, sess, nil
}

// killGrace is how long a killed command's session may take to close on a
// connection other commands share before the connection is closed too.
const killGrace = 10 * time.Second

// wait waits for the command on this goroutine; the deadline acts
// through a timer, so a running job holds no goroutine of its own besides
// its transport's, which matters with thousands of them. It reports
// whether the command was killed because ctx ended.
func (r *Runner) wait(ctx context.Context, c command) (waitErr error, killed bool) {
	var (
		mu     sync.Mutex
		waited bool
	)
	stopKill := context.AfterFunc(ctx, func() {
		mu.Lock()
		if waited {
			// The script ended as the deadline hit; its result stands.
			mu.Unlock()
			return
		}
		killed = true
		mu.Unlock()
		c.kill()
	})
	waitErr = c.wait()
	mu.Lock()
	waited = true
	mu.Unlock()
	stopKill()
	mu.Lock()
	defer mu.Unlock()
	return waitErr, killed
}

// Output runs script on the instance and returns its combined output
// (truncated to OutputLimit). A non-zero exit returns *ExitError carrying the
// output; other failures are as for Run. It suits short checks such as
// instance_ready_command.
func (r *Runner) Output(ctx context.Context, ci provider.ConnectInfo, script string, timeout time.Duration) ([]byte, error) {
	buf := &limitedBuffer{max: OutputLimit}
	code, err := r.Run(ctx, ci, Command{Script: script, Output: buf, Timeout: timeout})
	if err != nil {
		return buf.Bytes(), err
	}
	if code != 0 {
		return buf.Bytes(), &ExitError{Instance: ci.ID, Code: code, Output: buf.Bytes()}
	}
	return buf.Bytes(), nil
}

// wrapperCommand reads the whole script from stdin before running any of it;
// see the package doc for why.
const wrapperCommand = `sh -c '` + mergeStderr + `script=$(cat) && exec </dev/null && eval "$script"'`

// mergeStderr makes a job's stderr its stdout's pipe, which keeps the
// order of its log (see the package doc).
const mergeStderr = `exec 2>&1 && `

// errCommandTimeout is the context cause when Command.Timeout fires, so that
// a timeout can be told from the caller's own cancellation.
var errCommandTimeout = errors.New("command timeout")

func stopError(ctx context.Context, ci provider.ConnectInfo, cmd Command) error {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errCommandTimeout):
		return fmt.Errorf("instance %s: %w after %s; the script was killed (raise the job's timeout if it needs longer): %w",
			ci.ID, ErrTimeout, cmd.Timeout, context.DeadlineExceeded)
	case errors.Is(cause, context.DeadlineExceeded):
		return fmt.Errorf("instance %s: %w; the script was killed: %w", ci.ID, ErrTimeout, cause)
	default:
		return fmt.Errorf("instance %s: %w; the script was killed: %w", ci.ID, ErrCanceled, cause)
	}
}

// exitResult trusts an exit status the server sent even when keepalive gave
// up at the same moment: the script did finish.
func exitResult(ci provider.ConnectInfo, waitErr error, lost error) (int, error) {
	if waitErr == nil {
		return 0, nil
	}
	var exit *remoteExit
	if errors.As(waitErr, &exit) {
		return exit.code, nil
	}
	var sys *SystemError
	if errors.As(waitErr, &sys) {
		return -1, sys // the local path's own
	}
	if lost != nil {
		return -1, &SystemError{Instance: ci.ID, Op: "connection lost", Err: lost}
	}
	var missing *ssh.ExitMissingError
	if errors.As(waitErr, &missing) {
		return -1, &SystemError{Instance: ci.ID, Op: "connection lost",
			Err: errors.New("the session ended without an exit status (the instance stopped or its SSH server died)")}
	}
	return -1, &SystemError{Instance: ci.ID, Op: "connection lost", Err: waitErr}
}

// scriptInput builds what the wrapper reads on stdin: exports, then the script.
func scriptInput(cmd Command) (string, error) {
	var b strings.Builder
	for _, kv := range cmd.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return "", fmt.Errorf("%w: env entry %q has no '=': write it as NAME=VALUE", ErrInvalidCommand, kv)
		}
		if !ValidEnvName(k) {
			return "", fmt.Errorf("%w: env name %q is not a shell identifier: use letters, digits and _, not starting with a digit", ErrInvalidCommand, k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return "", fmt.Errorf("%w: env %s contains a NUL byte, which a shell cannot hold", ErrInvalidCommand, k)
		}
		b.WriteString("export ")
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(ShellQuote(v))
		b.WriteByte('\n')
	}
	b.WriteString(cmd.Script)
	return b.String(), nil
}

// ValidEnvName reports whether name can be exported by a POSIX shell:
// [A-Za-z_][A-Za-z0-9_]*.
func ValidEnvName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// ShellQuote quotes s as one word for a POSIX shell. Single quotes keep
// everything literal ($, `, \, newlines), and an embedded ' is closed, escaped
// and reopened.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (r *Runner) dial(ctx context.Context, ci provider.ConnectInfo) (*sshClient, error) {
	want, _, _, _, err := ssh.ParseAuthorizedKey([]byte(ci.HostKey))
	if err != nil {
		return nil, &SystemError{Instance: ci.ID, Op: "check host key",
			Err: fmt.Errorf("the provider gave no usable host key (%w); refusing to connect without one", err)}
	}
	signer, err := ssh.ParsePrivateKey(ci.PrivateKey)
	if err != nil {
		return nil, &SystemError{Instance: ci.ID, Op: "load client key",
			Err: fmt.Errorf("the provider's private key does not parse: %w", err)}
	}
	if ci.Username == "" {
		return nil, &SystemError{Instance: ci.ID, Op: "log in", Err: errors.New("the provider gave no username")}
	}
	timeout := r.DialTimeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	config := &ssh.ClientConfig{
		User:              ci.Username,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback:   fixedHostKey(want),
		HostKeyAlgorithms: hostKeyAlgorithms(want),
		Timeout:           timeout,
	}
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", ci.Addr)
	if err != nil {
		return nil, &SystemError{Instance: ci.ID, Op: "dial " + ci.Addr, Err: err}
	}
	// x/crypto/ssh's handshake takes no context: a deadline bounds it and
	// cancellation pulls the deadline in.
	_ = conn.SetDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	c, chans, reqs, err := ssh.NewClientConn(conn, ci.Addr, config)
	stop()
	if err != nil {
		conn.Close()
		if errors.Is(err, ErrHostKeyMismatch) {
			return nil, &SystemError{Instance: ci.ID, Op: "check host key", Err: err}
		}
		return nil, &SystemError{Instance: ci.ID, Op: "ssh handshake with " + ci.Addr, Err: err}
	}
	_ = conn.SetDeadline(time.Time{})
	return newSSHClient(c, chans, reqs), nil
}

// fixedHostKey accepts exactly want. Trust on first use would let anyone who
// takes over an instance's address receive the job's secrets.
func fixedHostKey(want ssh.PublicKey) ssh.HostKeyCallback {
	return func(hostname string, _ net.Addr, got ssh.PublicKey) error {
		if bytes.Equal(got.Marshal(), want.Marshal()) {
			return nil
		}
		return fmt.Errorf("%w: %s presented %s %s, the provider reported %s %s; refusing to connect (the address may now belong to another machine)",
			ErrHostKeyMismatch, hostname, got.Type(), ssh.FingerprintSHA256(got), want.Type(), ssh.FingerprintSHA256(want))
	}
}

// hostKeyAlgorithms asks the server for the algorithm of the key we expect,
// so that a server with several host keys shows the one we can check
// instead of failing the comparison.
func hostKeyAlgorithms(k ssh.PublicKey) []string {
	if k.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{k.Type()}
}

// lostCause records why keepalive gave up on the connection.
type lostCause struct {
	mu  sync.Mutex
	err error
}

func (l *lostCause) set(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

func (l *lostCause) get() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// keepAlive pings the server every KeepAliveInterval until the returned
// stop is called, and closes the connection once a ping goes unanswered
// for KeepAliveTimeout, which makes the session's Wait return. It runs on
// timers: a goroutine exists only while a ping is in flight.
func (r *Runner) keepAlive(client ssh.Conn, lost *lostCause) (stop func()) {
	interval := r.KeepAliveInterval
	if interval <= 0 {
		interval = DefaultKeepAliveInterval
	}
	timeout := r.KeepAliveTimeout
	if timeout <= 0 {
		timeout = DefaultKeepAliveTimeout
	}
	var (
		mu      sync.Mutex
		stopped bool
		tick    *time.Timer
	)
	giveUp := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			lost.set(err)
			client.Close()
		}
	}
	ping := func() {
		silent := time.AfterFunc(timeout, func() {
			giveUp(fmt.Errorf("no answer to keepalive within %s (the instance may be down or unreachable)", timeout))
		})
		_, _, err := client.SendRequest("keepalive@openssh.com", true, nil)
		if !silent.Stop() {
			return // timed out: the connection is closed
		}
		if err != nil {
			giveUp(fmt.Errorf("keepalive failed: %w", err))
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			tick.Reset(interval)
		}
	}
	mu.Lock()
	tick = time.AfterFunc(interval, ping)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		tick.Stop()
	}
}

// syncWriter serializes the stdout and stderr copiers and absorbs write
// errors (see Command.Output).
type syncWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		if _, err := s.w.Write(p); err != nil {
			s.err = err
		}
	}
	return len(p), nil
}

// ReadFrom is how the SSH session copies output to the writer (io.Copy
// prefers it): without it, io.Copy would hold a 32 KiB buffer per stream,
// two per running job, for the whole job (see package quietcopy).
func (s *syncWriter) ReadFrom(r io.Reader) (int64, error) {
	return quietcopy.Copy(writerOnly{s}, r)
}

// writerOnly hides syncWriter's ReadFrom from the copy.
type writerOnly struct{ io.Writer }

func (s *syncWriter) writeErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// limitedBuffer keeps the first max bytes and drops the rest.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.max - l.buf.Len(); room > 0 {
		if len(p) > room {
			l.buf.Write(p[:room])
		} else {
			l.buf.Write(p)
		}
	}
	return len(p), nil
}

func (l *limitedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.buf.Bytes())
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}
