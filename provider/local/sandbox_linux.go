package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"
)

// sandboxEnv is the environment marker that turns a re-executed berth
// binary into a sandbox. Its value is the instance directory.
const sandboxEnv = "BERTH_LOCAL_SANDBOX"

// listenerFD is the inherited SSH listener: ExtraFiles[0] becomes fd 3.
const listenerFD = 3

// RunSandboxIfRequested turns the process into a sandbox when it was started
// by this package, and never returns in that case; otherwise it returns at
// once. Call it first thing in main and in every TestMain of a package whose
// tests start local sandboxes:
//
//	func main() {
//		local.RunSandboxIfRequested()
//		...
//	}
func RunSandboxIfRequested() {
	dir := os.Getenv(sandboxEnv)
	if dir == "" {
		return
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := runSandbox(dir, log); err != nil {
		log.Error("sandbox failed", "err", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runSandbox sets up the sandbox as PID 1 of its namespaces and serves SSH.
// It returns only on failure, or in probe mode once the setup worked.
func runSandbox(dir string, log *slog.Logger) error {
	var cfg sandboxConfig
	b, err := os.ReadFile(filepath.Join(dir, configFile))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("parse %s: %w", configFile, err)
	}
	log = log.With("instance", cfg.ID)

	// Record who we are in host terms while the host's /proc is still
	// mounted: /proc/self resolves in the PID namespace of the procfs, not
	// ours, so this is our host PID.
	if !cfg.Probe {
		host, err := os.Readlink("/proc/self")
		if err != nil {
			return fmt.Errorf("read host pid: %w", err)
		}
		var pid int
		fmt.Sscan(host, &pid)
		_, start, err := procStat(pid)
		if err != nil {
			return fmt.Errorf("read host pid start time: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, pidFile), fmt.Appendf(nil, "%d %d\n", pid, start), 0o600); err != nil {
			return err
		}
	}

	var server *ssh.ServerConfig
	var ready *os.File
	if !cfg.Probe {
		server, err = serverConfig(dir, cfg.AuthorizedKey)
		if err != nil {
			return err
		}
		// Opened now because the instance directory is out of reach once
		// the new root is in place.
		ready, err = os.OpenFile(filepath.Join(dir, readyFile), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
	}

	if err := unix.Sethostname([]byte(cfg.ID)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	if cfg.Network == "isolated" {
		if err := loopbackUp(); err != nil {
			return err
		}
	}
	if err := setupRoot(dir, cfg.Hide); err != nil {
		return err
	}
	if cfg.Probe {
		return nil
	}

	f := os.NewFile(listenerFD, "ssh-listener")
	ln, err := net.FileListener(f)
	if err != nil {
		return fmt.Errorf("inherited SSH listener: %w", err)
	}
	f.Close()

	r := newReaper()
	go r.run()
	s := &sshd{config: server, reaper: r, log: log, hostname: cfg.ID}
	fmt.Fprintln(ready, "ready")
	ready.Close()
	log.Info("sandbox serving SSH", "addr", ln.Addr().String())
	return s.serve(ln)
}

// serverConfig loads the host key and allows only the group's client key.
func serverConfig(dir, authorized string) (*ssh.ServerConfig, error) {
	pemBytes, err := os.ReadFile(filepath.Join(dir, hostKeyFile))
	if err != nil {
		return nil, err
	}
	hostKey, err := ssh.ParsePrivateKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("parse host key: %w", err)
	}
	want, _, _, _, err := ssh.ParseAuthorizedKey([]byte(authorized))
	if err != nil {
		return nil, fmt.Errorf("parse authorized key: %w", err)
	}
	wantBytes := want.Marshal()
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == string(wantBytes) {
				return nil, nil
			}
			return nil, errors.New("key not authorized")
		},
	}
	cfg.AddHostKey(hostKey)
	return cfg, nil
}

// loopbackUp brings up lo in a fresh network namespace, where it starts down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}

// setupRoot builds the sandbox's root file system on a small tmpfs at
// dir/root and pivots into it. Host top-level directories are bound
// recursively and made read-only; /berth and /tmp are the instance's own
// writable directories; /proc is a new procfs for the PID namespace; /dev is
// the host's. A tmpfs root lets us create mount points (/berth) without
// writing to the host.
func setupRoot(dir string, hide []string) error {
	// Nothing we mount may propagate back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	root := filepath.Join(dir, rootDir)
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("mount root tmpfs: %w", err)
	}
	entries, err := os.ReadDir("/")
	if err != nil {
		return err
	}
	var readOnly []string
	for _, e := range entries {
		name := e.Name()
		src, dst := "/"+name, filepath.Join(root, name)
		switch name {
		case "proc", "tmp", "berth", "dev", "sys":
			continue
		}
		switch {
		case e.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, dst); err != nil {
				return err
			}
		case e.IsDir():
			if err := os.Mkdir(dst, 0o755); err != nil {
				return err
			}
			if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("bind %s: %w", src, err)
			}
			readOnly = append(readOnly, dst)
		case e.Type().IsRegular():
			if err := os.WriteFile(dst, nil, 0o644); err != nil {
				return err
			}
			if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("bind %s: %w", src, err)
			}
			readOnly = append(readOnly, dst)
		}
	}
	binds := []struct {
		src, dst string
		ro       bool
	}{
		{"/dev", "dev", false},
		{"/sys", "sys", true},
		{filepath.Join(dir, tmpDir), "tmp", false},
		{filepath.Join(dir, diskDir), "berth", false},
	}
	for _, b := range binds {
		dst := filepath.Join(root, b.dst)
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(b.src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", b.src, err)
		}
		if b.ro {
			readOnly = append(readOnly, dst)
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return err
	}
	for _, dst := range readOnly {
		attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(unix.AT_FDCWD, dst, unix.AT_RECURSIVE, &attr); err != nil {
			return fmt.Errorf("make %s read-only: %w", dst, err)
		}
	}
	proc := filepath.Join(root, "proc")
	if err := os.Mkdir(proc, 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount proc: %w", err)
	}
	// Hide the provider's state (client key, other instances) when it is
	// visible through a host bind.
	for _, h := range hide {
		p := filepath.Join(root, h)
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k"); err != nil {
			return fmt.Errorf("hide %s: %w", h, err)
		}
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	// pivot_root(".", ".") stacks the old root on top of the new one; the
	// detach then drops it.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", 0, &attr); err != nil {
		return fmt.Errorf("make / read-only: %w", err)
	}
	return nil
}

// reaper is PID 1's child reaper. Orphans of the whole sandbox end up as our
// children; wait4(-1) collects them. Commands we start ourselves register
// first so their exit status reaches the session that waits for it (we must
// not use exec.Cmd.Wait, which would race with wait4(-1)).
type reaper struct {
	mu      sync.Mutex
	waiters map[int]chan unix.WaitStatus
	sig     chan os.Signal
}

func newReaper() *reaper {
	r := &reaper{waiters: map[int]chan unix.WaitStatus{}, sig: make(chan os.Signal, 1)}
	signal.Notify(r.sig, syscall.SIGCHLD)
	return r
}

func (r *reaper) run() {
	for range r.sig {
		r.reap()
	}
}

func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		if c, ok := r.waiters[pid]; ok {
			c <- ws
			delete(r.waiters, pid)
		}
	}
}

// start starts a process and registers it before the reaper can see it exit.
func (r *reaper) start(argv0 string, argv []string, attr *os.ProcAttr) (int, <-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := os.StartProcess(argv0, argv, attr)
	if err != nil {
		return 0, nil, err
	}
	c := make(chan unix.WaitStatus, 1)
	r.waiters[p.Pid] = c
	pid := p.Pid
	p.Release()
	return pid, c, nil
}

// envValid keeps obviously broken env requests out of the command's
// environment.
func envValid(name string) bool {
	return name != "" && !strings.ContainsAny(name, "=\x00") && len(name) < 1024
}
