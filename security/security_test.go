//go:build linux

package security_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-ci/berth/executor"
	"github.com/berth-ci/berth/provider"
	"github.com/berth-ci/berth/provider/local"
)

func TestMain(m *testing.M) {
	local.RunSandboxIfRequested()
	os.Exit(m.Run())
}

// Environment of the copy of the test binary that runs as nobody.
const (
	unprivEnv = "BERTH_SECURITY_UNPRIVILEGED"
	attackEnv = "BERTH_SECURITY_ATTACK_BIN"
)

// fixture is a berth-like host: a state dir, config file and token file
// (with secrets in them), a local provider told they are private, two
// running sandboxes and an HTTP server on the host's loopback standing in
// for berth's API.
type fixture struct {
	t                     *testing.T
	p                     *local.Provider
	stateDir, providerDir string
	configFile, tokenFile string
	a, b                  string // instance IDs
	api                   string // host loopback address of the stand-in API
	attackBin             string
	ctx                   context.Context
	coreBefore            string
}

const secret = "s3cr3t-do-not-leak"

func newFixture(t *testing.T, config string) *fixture {
	t.Helper()
	return newFixtureHiding(t, config)
}

// newFixtureHiding is newFixture with more private paths than berth's
// state dir, config file and token file.
func newFixtureHiding(t *testing.T, config string, private ...string) *fixture {
	t.Helper()
	f := &fixture{t: t, ctx: context.Background(), attackBin: attackBinary(t)}
	root := t.TempDir()
	f.stateDir = filepath.Join(root, "state")
	f.providerDir = filepath.Join(f.stateDir, "provider", "local")
	f.configFile = filepath.Join(root, "berth.toml")
	f.tokenFile = filepath.Join(root, "gitlab-token")
	must(t, os.MkdirAll(f.providerDir, 0o700))
	must(t, os.WriteFile(filepath.Join(f.stateDir, "state.db"), []byte(secret), 0o600))
	must(t, os.WriteFile(filepath.Join(f.stateDir, "queue.db"), []byte(secret), 0o600))
	must(t, os.WriteFile(filepath.Join(f.stateDir, "api-token"), []byte(secret), 0o600))
	must(t, os.WriteFile(f.configFile, []byte("# "+secret+"\n"), 0o600))
	must(t, os.WriteFile(f.tokenFile, []byte(secret), 0o600))

	f.p = local.New()
	s := provider.Settings{StateDir: f.providerDir, Private: append([]string{f.stateDir, f.configFile, f.tokenFile}, private...)}
	if config != "" {
		s.Config = []byte(config)
	}
	if _, err := f.p.Init(f.ctx, s); err != nil {
		t.Fatalf("Init: %v", err)
	}
	t.Cleanup(func() {
		var ids []string
		f.p.Update(f.ctx, func(id string, _ provider.State) { ids = append(ids, id) })
		if t.Failed() {
			for _, id := range ids {
				b, _ := os.ReadFile(filepath.Join(f.instDir(id), "sandbox.log"))
				t.Logf("%s sandbox.log:\n%s", id, b)
			}
		}
		f.p.Decrease(f.ctx, ids)
	})
	f.a, f.b = f.start(), f.start()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, secret)
	}))
	t.Cleanup(srv.Close)
	f.api = srv.Listener.Addr().String()
	core, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	f.coreBefore = string(core)
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) instDir(id string) string {
	return filepath.Join(f.providerDir, "local", "instances", id)
}

// start boots one sandbox and waits until it serves SSH.
func (f *fixture) start() string {
	before := map[string]bool{}
	f.p.Update(f.ctx, func(id string, _ provider.State) { before[id] = true })
	if n, err := f.p.Increase(f.ctx, 1); n != 1 || err != nil {
		f.t.Fatalf("Increase: %d %v", n, err)
	}
	var id string
	f.p.Update(f.ctx, func(got string, _ provider.State) {
		if !before[got] {
			id = got
		}
	})
	deadline := time.Now().Add(time.Minute)
	for f.p.Heartbeat(f.ctx, id) != nil {
		if time.Now().After(deadline) {
			f.t.Fatalf("%s did not boot", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return id
}

// job runs script as a CI job on instance id, the way berth's manager does
// (executor over SSH), with the attack helper at /berth/attack. It returns
// the exit code and the combined output.
func (f *fixture) job(id, script string) (int, string) {
	f.t.Helper()
	disk := filepath.Join(f.instDir(id), "disk")
	b, err := os.ReadFile(f.attackBin)
	must(f.t, err)
	dst := filepath.Join(disk, "attack")
	must(f.t, os.WriteFile(dst, b, 0o755))
	fi, err := os.Stat(disk)
	must(f.t, err)
	st := fi.Sys().(*syscall.Stat_t)
	must(f.t, os.Lchown(dst, int(st.Uid), int(st.Gid)))
	ci, err := f.p.ConnectInfo(f.ctx, id)
	must(f.t, err)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
	defer cancel()
	code, err := executor.Run(ctx, ci, executor.Command{Script: script, Output: &out})
	if err != nil {
		f.t.Fatalf("job on %s: %v (output %q)", id, err, out.String())
	}
	return code, out.String()
}

// recycle ends a job the way the manager does before the slot takes the
// next one.
func (f *fixture) recycle(id string) {
	f.t.Helper()
	if err := f.p.Recycle(f.ctx, id); err != nil {
		f.t.Fatalf("Recycle %s: %v", id, err)
	}
}

// attackBinary builds the attack helper once (as root) or takes the one
// the root run built (as nobody).
func attackBinary(t *testing.T) string {
	if p := os.Getenv(attackEnv); p != "" {
		return p
	}
	builtOnce.Do(func() {
		dir, err := os.MkdirTemp("", "berth-attack-")
		if err != nil {
			builtErr = err
			return
		}
		os.Chmod(dir, 0o755)
		builtPath = filepath.Join(dir, "attack")
		cmd := exec.Command("go", "build", "-o", builtPath, "./testdata/attack")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			builtErr = fmt.Errorf("build attack helper: %v\n%s", err, out)
		}
	})
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return builtPath
}

// attack is one attempt that must fail. Script runs in a job; the attack
// counts as blocked when the script exits non-zero and its output matches
// blocked, which names the reason (so that a missing tool does not pass
// for a defence).
type attack struct {
	name, script, blocked string
}

func (f *fixture) attacks() []attack {
	aDisk := filepath.Join(f.instDir(f.a), "disk")
	ci, err := f.p.ConnectInfo(f.ctx, f.a)
	must(f.t, err)
	return []attack{
		{"remount a host bind read-write", "/berth/attack mount_setattr", "blocked: operation not permitted"},
		{"remount with mount(8)", "mount -o remount,rw /usr", "(?i)permission denied|not permitted"},
		{"write a host file", "echo pwned > /usr/berth-pwned || echo pwned > /etc/berth-pwned", "Read-only file system"},
		{"unmount to uncover the host", "/berth/attack unmount /usr", "blocked: operation not permitted"},
		{"clone a mount with open_tree", "/berth/attack open_tree", "blocked: operation not permitted"},
		{"read berth's state dir", "cat " + filepath.Join(f.stateDir, "state.db"), "No such file or directory"},
		{"read the job queue (other jobs' secrets)", "cat " + filepath.Join(f.stateDir, "queue.db"), "No such file or directory"},
		{"read the API token", "cat " + filepath.Join(f.stateDir, "api-token"), "No such file or directory"},
		{"read the SSH client key", "cat " + filepath.Join(f.providerDir, "local", "client_key"), "No such file or directory"},
		{"read the config file", "cat " + f.configFile, "No such file or directory"},
		{"read the GitLab token_file", "cat " + f.tokenFile, "No such file or directory"},
		{"open_by_handle_at escape", "/berth/attack open_by_handle_at", "blocked: operation not permitted"},
		{"mount cgroup2", "mkdir -p /tmp/cg && mount -t cgroup2 none /tmp/cg", "(?i)permission denied|not permitted"},
		{"reach the host's cgroups", "ls /sys/fs/cgroup", "No such file or directory"},
		{"write core_pattern", "echo '|/berth/attack' > /proc/sys/kernel/core_pattern", "(?i)permission denied|read-only"},
		{"set the clock", "/berth/attack settime", "blocked: operation not permitted"},
		{"set the clock with date(1)", "date -s @946684800", "(?i)not permitted"},
		{"ptrace the sandbox's init", "/berth/attack ptrace 1", "blocked: operation not permitted"},
		{"read the sandbox init's environment", "cat /proc/1/environ", "Permission denied"},
		{"read the sandbox init's descriptors", "cat /proc/1/fd/1", "Permission denied"},
		{"use the kernel keyring", "/berth/attack keyctl", "blocked: operation not permitted"},
		{"load a BPF program", "/berth/attack bpf", "blocked: operation not permitted"},
		{"open a host disk", "ls /dev/sda /dev/vda /dev/nvme0n1 /dev/kmsg /dev/mem", "No such file or directory"},
		{"see another sandbox's disk", "cat " + filepath.Join(aDisk, "secret"), "No such file or directory"},
		{"reach a host loopback service (berth's API)", "/berth/attack connect " + f.api, "blocked: .*connection refused"},
		{"reach another sandbox's SSH", "/berth/attack connect " + ci.Addr, "blocked: .*connection refused"},
		{"reach the host over AF_VSOCK", "/berth/attack socket vsock", "blocked: address family not supported"},
		{"open a packet socket", "/berth/attack socket packet", "blocked: address family not supported"},
		{"talk to nf_tables", "/berth/attack socket nfnetlink", "blocked: protocol not supported"},
		{"make a network namespace for nf_tables, veth and bridges", "unshare -Urn true", "(?i)not permitted"},
		{"make a network namespace with clone", "unshare -Ur --fork -n true", "(?i)not permitted"},
		{"hold the host user's user namespaces", "/berth/attack userns 200", "blocked: refused after [0-9]+: .*no space left on device"},
		{"read the kernel command line", "test -s /proc/cmdline && echo WORKED; cat /proc/cmdline; find /proc/acpi /proc/scsi -mindepth 1 2>/dev/null; exit 1", "^$"},
		{"hold the host user's inotify instances", "/berth/attack inotify 100", "blocked: refused after [0-9]+: too many open files"},
	}
}

// TestAttacks runs every attack from a job on sandbox B while sandbox A
// holds a secret on its disk.
func TestAttacks(t *testing.T) {
	f := newFixture(t, "")
	if code, out := f.job(f.a, "echo "+secret+" > /berth/secret"); code != 0 {
		t.Fatalf("job on A: %d %s", code, out)
	}
	for _, a := range f.attacks() {
		t.Run(a.name, func(t *testing.T) {
			code, out := f.job(f.b, a.script)
			if code == 0 || strings.Contains(out, "WORKED") || strings.Contains(out, secret) {
				t.Fatalf("attack worked (exit %d):\n%s", code, out)
			}
			if !regexp.MustCompile(a.blocked).MatchString(out) {
				t.Errorf("attack failed, but not for the expected reason %q:\n%s", a.blocked, out)
			}
		})
	}
	// Effects on the host, in case an attack half-worked.
	for _, p := range []string{"/usr/berth-pwned", "/etc/berth-pwned"} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("a job wrote %s on the host", p)
		}
	}
	if core, _ := os.ReadFile("/proc/sys/kernel/core_pattern"); string(core) != f.coreBefore {
		t.Errorf("core_pattern changed from %q to %q", f.coreBefore, core)
	}
	if y := time.Now().Year(); y < 2020 {
		t.Errorf("host clock was set back to %d", y)
	}
}

// TestOnlyAllowedHostPaths checks what a job sees of the host: the
// allowlist, its own /berth, /tmp, /dev and /proc, and nothing else.
func TestOnlyAllowedHostPaths(t *testing.T) {
	f := newFixture(t, `{"host_paths": ["/usr", "/bin", "/lib", "/lib64", "/etc"]}`)
	_, out := f.job(f.a, "ls -A / | tr '\\n' ' '; echo; ls -A /dev | tr '\\n' ' '")
	lines := strings.Split(out, "\n")
	var want []string
	for _, p := range []string{"berth", "bin", "dev", "etc", "lib", "lib64", "proc", "tmp", "usr"} {
		if _, err := os.Lstat("/" + p); err == nil || p == "berth" || p == "proc" || p == "dev" || p == "tmp" {
			want = append(want, p)
		}
	}
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("/ in a job holds %v, want %v", got, want)
	}
	wantDev := "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero"
	if got := strings.Join(strings.Fields(lines[1]), " "); got != wantDev {
		t.Errorf("/dev in a job holds %q, want %q", got, wantDev)
	}
	if code, out := f.job(f.a, "echo x > /dev/null && head -c 4 /dev/urandom | wc -c && echo y > /dev/shm/y && cat /dev/shm/y"); code != 0 || out != "4\ny\n" {
		t.Errorf("the usual devices do not work: exit %d, %q", code, out)
	}
}

// TestRootIsNotHostRoot checks that root in a job maps to an unprivileged
// host uid: as root, a subordinate one; unprivileged, the caller.
func TestRootIsNotHostRoot(t *testing.T) {
	f := newFixture(t, "")
	code, out := f.job(f.a, "id -u; touch /berth/mine; cat /proc/self/uid_map")
	if code != 0 || !strings.HasPrefix(out, "0\n") {
		t.Fatalf("job is not root in its namespace: %d %q", code, out)
	}
	fi, err := os.Stat(filepath.Join(f.instDir(f.a), "disk", "mine"))
	must(t, err)
	uid := fi.Sys().(*syscall.Stat_t).Uid
	if uid == 0 {
		t.Fatalf("a file made by root in a job belongs to host root")
	}
	if os.Geteuid() != 0 && int(uid) != os.Geteuid() {
		t.Errorf("unprivileged, a job's file belongs to uid %d, want the caller's %d", uid, os.Geteuid())
	}
	t.Logf("root in a job is host uid %d; the job's own uid_map: %q", uid, out)
}

// TestNothingSurvivesIntoTheNextJob leaves processes, files, System V IPC
// and a hostname behind in one job and checks that the next job on the same
// instance sees none of it.
func TestNothingSurvivesIntoTheNextJob(t *testing.T) {
	f := newFixture(t, "")
	id := f.a
	code, out := f.job(id, `
setsid sh -c 'while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &
nohup sleep 1000 </dev/null >/dev/null 2>&1 &
echo left > /tmp/left; echo left > /dev/shm/left; echo left > /berth/left
mkdir -p /tmp/ro/deep && chmod 000 /tmp/ro
ipcmk -M 4096 >/dev/null 2>&1 || true
hostname evil
chmod 000 /berth
echo done`)
	if code != 0 || !strings.Contains(out, "done") {
		t.Fatalf("first job: %d %q", code, out)
	}
	f.recycle(id)
	code, out = f.job(id, `
for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline 2>/dev/null; echo; done | grep -c '[s]leep' || true
ls -A /tmp /dev/shm /berth | grep -v '^attack$' | grep -v ':$' | grep -c . || true
ipcs -m 2>/dev/null | grep -c '^0x' || true
hostname
stat -c %a /berth`)
	want := fmt.Sprintf("0\n0\n0\n%s\n755\n", id)
	if code != 0 || out != want {
		t.Errorf("second job saw the first job's leftovers: exit %d\n got %q\nwant %q", code, out, want)
	}
}

// TestInitSurvivesSignals checks that a job cannot kill the sandbox's init
// (and with it SSH) by signalling it.
func TestInitSurvivesSignals(t *testing.T) {
	f := newFixture(t, "")
	f.job(f.a, "for s in TERM INT HUP QUIT USR1 USR2 SEGV ABRT; do kill -$s 1; done; sleep 0.2")
	if code, out := f.job(f.a, "echo alive"); code != 0 || out != "alive\n" {
		t.Fatalf("sandbox did not survive signals to its init: %d %q", code, out)
	}
}

// TestHostNetworkReachesLoopback is the control for the network attacks:
// with network = "host" the same connection works, so the isolated result
// is the namespace's doing, not a broken helper.
func TestHostNetworkReachesLoopback(t *testing.T) {
	f := newFixture(t, `{"network": "host"}`)
	if code, out := f.job(f.a, "/berth/attack connect "+f.api); code != 0 || !strings.Contains(out, "WORKED") {
		t.Fatalf("with network host a job cannot reach the host loopback: %d %q", code, out)
	}
}

// TestRefusesVisiblePrivatePath checks that Init refuses host paths that
// would show berth's files to jobs where it cannot hide them, naming the
// path and the key.
func TestRefusesVisiblePrivatePath(t *testing.T) {
	// A file in a directory that is not berth's own: covering it would
	// take the rest of that directory from jobs too.
	shared, err := os.MkdirTemp("/var/tmp", "berth-shared-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(shared) })
	must(t, os.Mkdir(filepath.Join(shared, "ci"), 0o755))
	must(t, os.WriteFile(filepath.Join(shared, "ci", "token"), []byte(secret), 0o600))
	for _, c := range []struct{ private, config, why string }{
		{filepath.Join(shared, "ci", "token"), fmt.Sprintf(`{"host_paths": ["/usr", %q]}`, shared), "a file in a directory not berth's own"},
		{"/etc/berth-absent-dir/token", "", "its directory does not exist yet"},
		{"/opt/berth-absent-dir/state", "", "its directory does not exist yet"},
		{"/etc/hostname", "", "a file directly in a host path"},
		{"/srv/berth-absent-dir/config.toml", `{"host_paths": ["/usr", "/srv"]}`, "its directory does not exist yet"},
		{"/usr", `{"host_paths": ["/usr/share"]}`, "a host path inside it"},
	} {
		p := local.New()
		s := provider.Settings{StateDir: t.TempDir(), Private: []string{c.private}, Config: []byte(c.config)}
		if c.config == "" {
			s.Config = nil
		}
		_, err := p.Init(context.Background(), s)
		if !errors.Is(err, local.ErrPrivateVisible) {
			t.Errorf("private %s with config %s (%s): Init returned %v, want ErrPrivateVisible", c.private, c.config, c.why, err)
			continue
		}
		if !strings.Contains(err.Error(), c.private) || !strings.Contains(err.Error(), "host_paths") {
			t.Errorf("error does not name the path and the key: %v", err)
		}
	}
}

// TestHidesPrivateDirInHostPath is the packaged service's layout: the
// config in a directory of its own inside a host path (/etc/berth under
// /etc). Jobs see the host path, not that directory, and cannot uncover
// it: not by unmounting the cover, not by binding the host path again.
func TestHidesPrivateDirInHostPath(t *testing.T) {
	base, conf := hiddenConfigLayout(t)
	// Both ways a host path is shown: an overlay (network isolated) and a
	// bind mount (network host).
	for _, network := range []string{"isolated", "host"} {
		cfg := fmt.Sprintf(`{"network": %q, "host_paths": ["/usr", "/bin", "/sbin", "/lib", "/lib64", %q]}`, network, base)
		hidesPrivateDir(t, newFixtureHiding(t, cfg, conf), base, conf)
	}
}

// hiddenConfigLayout makes a host path base (under /var/tmp: a sandbox has
// its own /tmp) holding public.txt and berth/berth.toml, the config berth
// keeps private, as /etc holds /etc/berth/berth.toml.
func hiddenConfigLayout(t *testing.T) (base, conf string) {
	t.Helper()
	var err error
	base, err = os.MkdirTemp("/var/tmp", "berth-hide-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	must(t, os.Chmod(base, 0o755))
	must(t, os.WriteFile(filepath.Join(base, "public.txt"), []byte("public\n"), 0o644))
	must(t, os.Mkdir(filepath.Join(base, "berth"), 0o755))
	conf = filepath.Join(base, "berth", "berth.toml")
	must(t, os.WriteFile(conf, []byte(secret), 0o644))
	return base, conf
}

// hidesPrivateDir checks that jobs of f see base but not base/berth.
func hidesPrivateDir(t *testing.T, f *fixture, base, conf string) {
	code, out := f.job(f.a, fmt.Sprintf(`cat %[1]s/public.txt
ls -A %[1]s/berth | wc -l
cat %[1]s/berth/berth.toml 2>/dev/null || echo hidden
umount %[1]s/berth 2>/dev/null; umount -l %[1]s/berth 2>/dev/null
cat %[1]s/berth/berth.toml 2>/dev/null || echo still hidden
touch %[1]s/berth/x 2>/dev/null || echo read-only`, base))
	if code != 0 || strings.Contains(out, secret) || out != "public\n0\nhidden\nstill hidden\nread-only\n" {
		t.Fatalf("a job saw inside the hidden directory %s/berth: exit %d\n%s", base, code, out)
	}
	// The same after the operator rewrites the file the usual way
	// (a new file renamed over the old): the cover is on the directory.
	must(t, os.WriteFile(conf+".new", []byte(secret), 0o644))
	must(t, os.Rename(conf+".new", conf))
	if code, out := f.job(f.a, "cat "+conf+" 2>/dev/null || echo hidden"); code != 0 || out != "hidden\n" {
		t.Fatalf("after the config was replaced, a job read it: exit %d %q", code, out)
	}
}
