//go:build linux

package local_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/internal/imagetest"
	"github.com/berth-ci/berth/jobroot"
	"github.com/berth-ci/berth/provider/local"
)

// buildSandboxBinary builds cmd/berth-sandbox into a new directory, with
// extra go build arguments, and returns the directory.
func buildSandboxBinary(t testing.TB, args ...string) string {
	return buildSandboxBinaryFrom(t, "../../cmd/berth-sandbox", "", args...)
}

// buildSandboxBinaryFrom builds the command pkg as berth-sandbox into a new
// directory, with env added to the go tool's (when not empty) and extra go
// build arguments, and returns the directory.
func buildSandboxBinaryFrom(t testing.TB, pkg, env string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go tool on PATH to build berth-sandbox")
	}
	dir := t.TempDir()
	cmd := exec.Command("go", append(append([]string{"build", "-o", filepath.Join(dir, local.SandboxBinaryName)}, args...), pkg)...)
	if env != "" {
		cmd.Env = append(os.Environ(), env)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s as berth-sandbox: %v\n%s", pkg, err, out)
	}
	return dir
}

// syncBuffer collects log lines written from any goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sandboxGroup is a provider that looked for berth-sandbox in a chosen
// directory, with its state directory and log.
type sandboxGroup struct {
	p     *local.Provider
	state string
	logs  *syncBuffer
}

// groupWithSandboxBinaryIn initialises a provider that looks for
// berth-sandbox in binDir.
func groupWithSandboxBinaryIn(t *testing.T, binDir string) sandboxGroup {
	t.Helper()
	restore := local.UseSandboxBinaryDir(binDir)
	defer restore()
	g := sandboxGroup{state: t.TempDir(), logs: &syncBuffer{}}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(g.logs, nil)))
	defer slog.SetDefault(prev)
	// Host network: the image job below pulls from a registry on loopback.
	g.p = newGroup(t, g.state, `{"network":"host"}`)
	return g
}

// startedFrom starts an instance, checks that it serves jobs and returns
// the binary its PID 1 runs.
func (g sandboxGroup) startedFrom(t *testing.T) (id, exe string) {
	t.Helper()
	id = startOne(t, g.p)
	if res := run(t, g.p, id, "echo ok"); res.Stdout != "ok\n" {
		t.Fatalf("echo ok on %s: %q %q", id, res.Stdout, res.Stderr)
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(readMeta(t, g.state, id).PID) + "/exe")
	if err != nil {
		t.Fatal(err)
	}
	return id, exe
}

// A berth-sandbox of the same build starts the sandboxes, and the image
// launcher and job root it re-executes run image jobs as before.
func TestSandboxesStartFromAMatchingBerthSandbox(t *testing.T) {
	bin := buildSandboxBinary(t)
	g := groupWithSandboxBinaryIn(t, bin)
	if !strings.Contains(g.logs.String(), "sandboxes start from berth-sandbox") {
		t.Errorf("no log line saying berth-sandbox is used:\n%s", g.logs)
	}
	id, exe := g.startedFrom(t)
	if want := filepath.Join(bin, local.SandboxBinaryName); exe != want {
		t.Fatalf("sandbox runs %s, want %s", exe, want)
	}
	// berth's descriptor of the binary is close-on-exec: the sandbox does
	// not hold it (nor hand it to jobs).
	pid := strconv.Itoa(readMeta(t, g.state, id).PID)
	fds, _ := os.ReadDir("/proc/" + pid + "/fd")
	for _, fd := range fds {
		if target, _ := os.Readlink("/proc/" + pid + "/fd/" + fd.Name()); target == exe {
			t.Errorf("sandbox PID 1 holds fd %s on its own binary", fd.Name())
		}
	}
	host := imagetest.Registry(t)
	ref := imagetest.Push(t, host, "busybox:1", imagetest.Busybox(t, ""))
	ci, err := g.p.ConnectInfo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out logBuf
	var r executor.Runner
	code, err := r.RunInImage(context.Background(), ci, executor.Command{Script: "grep NAME= /etc/os-release", Output: &out},
		executor.ImageJob{Name: ref, Settings: jobroot.Settings{Insecure: []string{host}}})
	if err != nil || code != 0 || !strings.Contains(out.String(), "NAME=berth-test-image") {
		t.Fatalf("image job from berth-sandbox: exit %d, %v:\n%s", code, err, out.String())
	}

	// Written to in place (cp over it) while berth runs: its content is
	// no longer the build berth checked, so it never runs again.
	if _, err := g.p.Decrease(context.Background(), []string{id}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, g.p, id)
	// The sandbox spawner runs from the checked file, so while it runs the
	// kernel refuses to write to it; it is stopped here to change it.
	if spawner := local.SpawnerPID(g.p); spawner > 0 {
		if _, err := os.OpenFile(filepath.Join(bin, local.SandboxBinaryName), os.O_WRONLY, 0); !errors.Is(err, syscall.ETXTBSY) {
			t.Errorf("berth-sandbox opened for writing while the spawner runs it: %v, want ETXTBSY", err)
		}
		syscall.Kill(spawner, syscall.SIGKILL)
		waitExited(t, spawner)
	}
	f, err := os.OpenFile(filepath.Join(bin, local.SandboxBinaryName), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt([]byte{0x7f}, 0) // the byte it holds: only the file's times change
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	if _, exe := g.startedFrom(t); exe != self {
		t.Errorf("after berth-sandbox changed, a sandbox runs %s, want this test binary %s", exe, self)
	}
	if !strings.Contains(g.logs.String(), "it changed since berth checked it") {
		t.Errorf("no log line saying berth-sandbox changed:\n%s", g.logs)
	}
}

// waitGone waits until p no longer lists id.
func waitGone(t *testing.T, p *local.Provider, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, ok := states(t, p)[id]; !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still listed a minute after Decrease", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A berth-sandbox that is absent, from another build, not berth-sandbox
// at all, or that someone else could change is refused with one log line
// saying why, and sandboxes start from the running binary as before.
func TestStaleOrUnsafeBerthSandboxIsRefused(t *testing.T) {
	good := filepath.Join(buildSandboxBinary(t), local.SandboxBinaryName)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, why string
		setup     func(t *testing.T, dir string)
	}{
		{"absent", "no berth-sandbox beside it", func(*testing.T, string) {}},
		{"another build", "another build than this binary", func(t *testing.T, dir string) {
			stale := staleSandboxBinary(t)
			copyExecutable(t, stale, filepath.Join(dir, local.SandboxBinaryName), 0o755)
		}},
		{"not berth-sandbox", "not a berth-sandbox of this release", func(t *testing.T, dir string) {
			copyExecutable(t, "/bin/true", filepath.Join(dir, local.SandboxBinaryName), 0o755)
		}},
		{"group-writable", "writable by group or others (mode 0775)", func(t *testing.T, dir string) {
			copyExecutable(t, good, filepath.Join(dir, local.SandboxBinaryName), 0o775)
		}},
		{"world-writable directory", "is writable by group or others (mode 0777)", func(t *testing.T, dir string) {
			copyExecutable(t, good, filepath.Join(dir, local.SandboxBinaryName), 0o755)
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}},
		{"link into a world-writable directory", "is writable by group or others (mode 0777)", func(t *testing.T, dir string) {
			open := t.TempDir()
			if err := os.Chmod(open, 0o777); err != nil {
				t.Fatal(err)
			}
			copyExecutable(t, good, filepath.Join(open, local.SandboxBinaryName), 0o755)
			if err := os.Symlink(filepath.Join(open, local.SandboxBinaryName), filepath.Join(dir, local.SandboxBinaryName)); err != nil {
				t.Fatal(err)
			}
		}},
		{"owned by another user", "owned by uid 65534", func(t *testing.T, dir string) {
			if os.Geteuid() != 0 {
				t.Skip("only root can give a file away")
			}
			path := filepath.Join(dir, local.SandboxBinaryName)
			copyExecutable(t, good, path, 0o755)
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(t, dir)
			g := groupWithSandboxBinaryIn(t, dir)
			logs := g.logs.String()
			if !strings.Contains(logs, c.why) || !strings.Contains(logs, "sandboxes start from this binary") {
				t.Errorf("log does not say %q and that sandboxes start from this binary:\n%s", c.why, logs)
			}
			if _, exe := g.startedFrom(t); exe != self {
				t.Errorf("sandbox runs %s, want this test binary %s", exe, self)
			}
		})
	}
}

// staleSandboxBinary builds berth-sandbox from this source with one comment
// added to provider/local/doc.go: the smallest change that makes another
// build.
func staleSandboxBinary(t *testing.T) string {
	t.Helper()
	doc, err := filepath.Abs("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	changed := filepath.Join(tmp, "doc.go")
	if err := os.WriteFile(changed, append(b, "// a later change\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlay, []byte(`{"Replace":{`+strconv.Quote(doc)+`:`+strconv.Quote(changed)+`}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(buildSandboxBinary(t, "-overlay", overlay), local.SandboxBinaryName)
}

func copyExecutable(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, mode); err != nil { // past the umask
		t.Fatal(err)
	}
}
