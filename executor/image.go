package executor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/berth-ci/berth/images"
	"github.com/berth-ci/berth/jobroot"
	"github.com/berth-ci/berth/provider"
)

// ImageJob says which image a command runs in (see RunInImage).
type ImageJob struct {
	// Name is the image reference as the job wrote it.
	Name string
	// Entrypoint overrides the image's entrypoint; [""] clears it.
	Entrypoint []string
	// User is the user the job runs as in its image ("" : the image's).
	User string
	// Credentials are the job's registry logins.
	Credentials []images.Credential
	// Settings are the group's [images] config.
	Settings jobroot.Settings
	// Services are started beside the job (GitLab's services:).
	Services []jobroot.Service
	// Binds are instance directories bound at the same path in the job's
	// root, besides its working directory (GitLab's builds dir).
	Binds []string
}

// ImageError reports that the job could not start in its image: the image
// could not be pulled (Reason image_pull_failure) or the instance could not
// build the job's root (runner_system_failure). The message names the image.
type ImageError struct {
	// Instance is the ID of the instance.
	Instance string
	// Image is the image the job named.
	Image string
	// Reason is GitLab's failure reason.
	Reason string
	// Message says what went wrong.
	Message string
}

// Error reads "instance ID: MESSAGE".
func (e *ImageError) Error() string { return fmt.Sprintf("instance %s: %s", e.Instance, e.Message) }

// RunInImage runs cmd with img's root file system as its root, through
// berth's job runner on the instance (package jobroot): the berth binary
// itself, copied to the instance once and checked by its SHA-256. Outcomes
// are as for Run, plus *ImageError when the job could not start in its
// image.
func (r *Runner) RunInImage(ctx context.Context, ci provider.ConnectInfo, cmd Command, img ImageJob) (int, error) {
	code, missing, err := r.runInImage(ctx, ci, cmd, img)
	if missing {
		// The shell did not find the runner: the instance lost its copy
		// (a new disk behind the same ID). Copy it again, once.
		installed.Delete(ci.ID + "\x00" + ci.Addr)
		r.logger().Warn("job runner missing on the instance; copying it again", "instance", ci.ID)
		code, _, err = r.runInImage(ctx, ci, cmd, img)
	}
	return code, err
}

// runInImage is one attempt; missing reports that the shell did not find
// the runner (nothing of the job ran).
func (r *Runner) runInImage(ctx context.Context, ci provider.ConnectInfo, cmd Command, img ImageJob) (int, bool, error) {
	input, err := scriptInput(cmd)
	if err != nil {
		return -1, false, err
	}
	bin, err := r.installRunner(ctx, ci)
	if err != nil {
		return -1, false, err
	}
	spec := jobroot.Spec{
		Image: img.Name, Entrypoint: img.Entrypoint, User: img.User, Credentials: img.Credentials, Settings: img.Settings,
		BindWorkdir: true, Services: img.Services,
		Command: []string{"sh", "-c", `script=$(cat) && exec </dev/null && eval "$script"`},
	}
	for _, b := range img.Binds {
		spec.Binds = append(spec.Binds, jobroot.Bind{Source: b, Target: b})
	}
	line, err := json.Marshal(spec)
	if err != nil {
		return -1, false, err
	}
	tail := &tailBuffer{max: 4096}
	cmd.remote = "BERTH_JOBROOT=run " + bin
	cmd.stdin = io.MultiReader(bytes.NewReader(append(line, '\n')), strings.NewReader(input))
	var out2 io.Writer = io.Discard
	if cmd.Output != nil {
		out2 = cmd.Output
	}
	// Held back until it is clear the runner started: a missing runner's
	// "not found" is not the job's output.
	first := &bytes.Buffer{}
	cmd.Output = &gateWriter{held: first, next: io.MultiWriter(out2, tail)}
	code, err := r.Run(ctx, ci, cmd)
	g := cmd.Output.(*gateWriter)
	if err == nil && code == 127 && bin != "berth" && g.stillHeld() && runnerNotFound(first.Bytes()) {
		return code, true, nil
	}
	g.flush()
	if err == nil && code == jobroot.ExitSetupFailed {
		if se := jobroot.ParseSetupError(tail.Bytes()); se != nil {
			return -1, false, &ImageError{Instance: ci.ID, Image: se.Image, Reason: se.Reason, Message: se.Message}
		}
	}
	return code, false, err
}

// runnerNotFound recognises the shell's complaint about a missing command.
func runnerNotFound(out []byte) bool {
	s := string(out)
	return strings.Contains(s, "not found") || strings.Contains(s, "No such file")
}

// installed remembers, per instance, where its runner is.
var installed sync.Map

// installRunner makes sure the instance has this berth binary and returns
// the shell word that starts it.
func (r *Runner) installRunner(ctx context.Context, ci provider.ConnectInfo) (string, error) {
	key := ci.ID + "\x00" + ci.Addr
	if p, ok := installed.Load(key); ok {
		return p.(string), nil
	}
	if ci.Local != nil {
		// Only the local provider's own sandboxes come with a local
		// exec socket, and they all have berth's runner built in.
		installed.Store(key, "berth")
		return "berth", nil
	}
	client, err := r.dial(ctx, ci)
	if err != nil {
		return "", err
	}
	builtin, _, _ := client.SendRequest(jobroot.BuiltinRequest, true, nil)
	client.Close()
	if builtin {
		installed.Store(key, "berth")
		return "berth", nil
	}
	sum, self, err := selfHash()
	if err != nil {
		return "", &SystemError{Instance: ci.ID, Op: "hash the berth binary", Err: err}
	}
	dir := `"${XDG_CACHE_HOME:-$HOME/.cache}/berth/bin"`
	path := dir + "/berth-" + sum[:16]
	out, err := r.Output(ctx, ci, "p="+path+"; [ -x \"$p\" ] && echo \"$p\" || true", 0)
	if err != nil {
		return "", err
	}
	if p := strings.TrimSpace(string(out)); p != "" {
		installed.Store(key, ShellQuote(p))
		return ShellQuote(p), nil
	}
	f, err := os.Open(self)
	if err != nil {
		return "", &SystemError{Instance: ci.ID, Op: "open the berth binary", Err: err}
	}
	defer f.Close()
	// Written to a temporary name, checked, then renamed: a half copy
	// never runs.
	script := fmt.Sprintf(`set -e; d=%s; mkdir -p "$d"; chmod 700 "$d"; t="$d/.berth-$$"; cat > "$t"; `+
		`echo "%s  $t" | sha256sum -c --status || { rm -f "$t"; echo "the copied berth binary does not have SHA-256 %s" >&2; exit 1; }; `+
		`chmod 755 "$t"; mv "$t" %s; echo %s`, dir, sum, sum, path, path)
	var buf limitedBuffer
	buf.max = OutputLimit
	code, err := r.Run(ctx, ci, Command{Output: &buf, remote: "sh -c " + ShellQuote(script), stdin: f})
	if err != nil {
		return "", err
	}
	if code != 0 {
		return "", &SystemError{Instance: ci.ID, Op: "install the job runner", Err: fmt.Errorf("exit %d: %s", code, bytes.TrimSpace(buf.Bytes()))}
	}
	p := ShellQuote(strings.TrimSpace(string(buf.Bytes())))
	installed.Store(key, p)
	return p, nil
}

var selfSum struct {
	once      sync.Once
	sum, path string
	err       error
}

// selfHash is the SHA-256 of the running berth binary.
func selfHash() (string, string, error) {
	selfSum.once.Do(func() {
		p, err := os.Executable()
		if err != nil {
			selfSum.err = err
			return
		}
		f, err := os.Open(p)
		if err != nil {
			selfSum.err = err
			return
		}
		defer f.Close()
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			selfSum.err = err
			return
		}
		selfSum.sum, selfSum.path = hex.EncodeToString(h.Sum(nil)), p
	})
	return selfSum.sum, selfSum.path, selfSum.err
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.b...)
}

// IsImageError reports whether err is an *ImageError and returns it.
func IsImageError(err error) (*ImageError, bool) {
	var ie *ImageError
	ok := errors.As(err, &ie)
	return ie, ok
}

// gateWriter holds the first output back until the runner shows it runs
// (its first line says which image it uses), then passes everything on.
type gateWriter struct {
	mu      sync.Mutex
	held    *bytes.Buffer
	next    io.Writer
	flushed bool
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.flushed {
		return g.next.Write(p)
	}
	g.held.Write(p)
	if b := g.held.Bytes(); bytes.Contains(b, []byte(" image ")) || len(b) >= 512 {
		g.flushed = true
		g.next.Write(b)
	}
	return len(p), nil
}

func (g *gateWriter) stillHeld() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.flushed
}

// flush passes on what is still held.
func (g *gateWriter) flush() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.flushed {
		g.flushed = true
		g.next.Write(g.held.Bytes())
	}
}
