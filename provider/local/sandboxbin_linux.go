package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SandboxBinaryName is the lean binary that starts sandboxes when it lies
// beside berth's: it links only the sandbox's side of this package, so each
// sandbox process (PID 1, the image launcher, the job roots) skips the
// package initialisation of everything else berth links (~3.5 ms of CPU
// per process on a small VM).
const SandboxBinaryName = "berth-sandbox"

// sandboxBinaryDir is where Init looks for berth-sandbox: the directory of
// the running binary, like provider plugins. Tests point it elsewhere.
var sandboxBinaryDir = func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return filepath.Dir(exe)
}

// selfExe starts a sandbox from the running binary itself.
const selfExe = "/proc/self/exe"

// minSandboxFD is the lowest descriptor number the opened berth-sandbox may
// have. The child of exec.Cmd moves the descriptors it passes to numbers
// below twice their count (at most ~30 here) before it executes the binary
// through /proc/self/fd/N, so N must lie above them.
const minSandboxFD = 100

// identityTimeout bounds the run of berth-sandbox that reads its identity.
const identityTimeout = 10 * time.Second

// sandboxBinary is an opened, checked berth-sandbox. Sandboxes execute it
// through its descriptor: what runs is the file that was checked, even if
// the path is replaced later (an upgrade that renames a new file in), and
// the sandbox's subordinate uid needs no access to the directories on its
// path.
type sandboxBinary struct {
	f       *os.File // close-on-exec, numbered at least minSandboxFD
	fd      int
	path    string
	checked unix.Stat_t // as it was checked
	log     *slog.Logger
	changed atomic.Bool // written to since: never run again
}

// exe is the path a sandbox is executed from: berth-sandbox through its
// descriptor, or the running binary when b is nil or the file was written
// to in place since it was checked (cp over it: the new content is not
// known to be the same build).
func (b *sandboxBinary) exe() string {
	if b == nil || b.changed.Load() {
		return selfExe
	}
	var st unix.Stat_t
	if err := unix.Fstat(b.fd, &st); err != nil || st.Ctim != b.checked.Ctim || st.Size != b.checked.Size {
		if !b.changed.Swap(true) {
			b.log.Warn("not using "+SandboxBinaryName+" any more: it changed since berth checked it; sandboxes start from this binary until berth restarts", "binary", b.path)
		}
		return selfExe
	}
	return "/proc/self/fd/" + strconv.Itoa(b.fd)
}

// findSandboxBinary returns the berth-sandbox in dir when it is safe to run
// and the same build as this binary, else nil: sandboxes then start from
// this binary, as they always could. It logs one line saying which.
func findSandboxBinary(ctx context.Context, log *slog.Logger, dir string) *sandboxBinary {
	if dir == "" {
		return nil
	}
	path := filepath.Join(dir, SandboxBinaryName)
	b, err := openSandboxBinary(ctx, path, log)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.Info("sandboxes start from this binary: no "+SandboxBinaryName+" beside it", "looked_for", path)
		return nil
	case err != nil:
		log.Warn("not using "+SandboxBinaryName+"; sandboxes start from this binary, which boots them slower: "+err.Error(), "binary", path)
		return nil
	}
	log.Info("sandboxes start from "+SandboxBinaryName, "binary", path)
	return b
}

// openSandboxBinary opens path, checks who may change it and that it is
// the same build as this binary.
func openSandboxBinary(ctx context.Context, path string, log *slog.Logger) (*sandboxBinary, error) {
	// The directory it lies in, and the one it links to if it is a
	// symbolic link: whoever may write there could swap the file.
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{filepath.Dir(path), filepath.Dir(real)} {
		dir, err := os.Stat(d)
		if err != nil {
			return nil, err
		}
		if err := checkOwner(dir, "its directory "+d); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("it is not an executable file (mode %s)", fi.Mode())
	}
	if err := checkOwner(fi, "it"); err != nil {
		return nil, err
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, minSandboxFD)
	if err != nil {
		return nil, fmt.Errorf("keep it open: %w", err)
	}
	b := &sandboxBinary{f: os.NewFile(uintptr(fd), path), fd: fd, path: path, log: log}
	if err := unix.Fstat(fd, &b.checked); err != nil {
		b.f.Close()
		return nil, err
	}
	if err := b.checkIdentity(ctx); err != nil {
		b.f.Close()
		return nil, err
	}
	return b, nil
}

// checkOwner refuses a file or directory that someone other than root or
// berth's own user could change: whoever can replace berth-sandbox runs
// code in every sandbox and, as root, runs it as root when berth reads its
// identity.
func checkOwner(fi fs.FileInfo, what string) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("cannot tell who owns %s", what)
	}
	if uid := os.Geteuid(); st.Uid != 0 && int(st.Uid) != uid {
		return fmt.Errorf("%s is owned by uid %d, not by root or berth's uid %d: chown root it", what, st.Uid, uid)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%s is writable by group or others (mode %04o): chmod go-w it", what, perm)
	}
	return nil
}

// checkIdentity runs the binary to read its build identity and compares it
// with this binary's: the interface between berth and its sandboxes is
// internal, so a berth-sandbox left from another build must never run.
func (b *sandboxBinary) checkIdentity(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, identityTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/fd/"+strconv.Itoa(b.fd))
	cmd.Args = []string{SandboxBinaryName}
	cmd.Env = []string{IdentityEnv + "=1"}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &capped{&out}, &capped{&errOut}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("it is not a berth-sandbox of this release: `%s=1 %s` failed: %v: %s", IdentityEnv, b.path, err, bytes.TrimSpace(errOut.Bytes()))
	}
	var sb buildIdentity
	if err := json.Unmarshal(out.Bytes(), &sb); err != nil {
		return fmt.Errorf("it is not a berth-sandbox of this release: its build identity does not parse: %v", err)
	}
	if why := ownIdentity().mismatch(sb); why != "" {
		return fmt.Errorf("it is another build than this binary (install both from the same release or build): %s", why)
	}
	return nil
}

// capped keeps the first 64 KiB written to it: a build identity is a few
// kilobytes, and a wrong binary must not fill berth's memory.
type capped struct{ b *bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := 64<<10 - c.b.Len(); room < len(p) {
		c.b.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.b.Write(p)
}
