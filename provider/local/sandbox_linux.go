package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/internal/cloexec"
	"github.com/berth-ci/berth/internal/logging"
	"github.com/berth-ci/berth/jobroot"
)

// sandboxEnv is the environment marker that turns a re-executed berth
// binary into a sandbox. Its value is the instance directory, which tools
// (and tests) use to find the sandbox processes of a state dir.
const sandboxEnv = "BERTH_LOCAL_SANDBOX"

// Descriptors a sandbox inherits (ExtraFiles[i] becomes fd 3+i). The sandbox
// gets everything it needs from its instance directory this way, because as
// root it runs as a subordinate uid that may not reach that directory.
const (
	listenerFD = 3 // the SSH listener on the host's loopback
	configFD   = 4 // a pipe carrying the sandboxConfig as JSON
	pidFD      = 5 // the instance's sandbox.pid, for writing
	readyFD    = 6 // the instance's ready marker, for writing
	diskFD     = 7 // the instance's disk directory (O_PATH), mounted at /berth
	tmpFD      = 8 // the instance's tmp directory (O_PATH), mounted at /tmp
	// imagesFD (9) is the image cache directory, see jobroot_linux.go.
	diskPollFD = 10 // berth's diskPoller socket, when sandboxConfig.DiskPoller
	// execFD (11) is berth's exec socket, see localexec_linux.go.
)

// sandboxGOMAXPROCS is the GOMAXPROCS of a sandbox's PID 1 and of its
// image launcher. One P is
// enough for a process that mostly waits and relays output (measured with
// ten output-heavy jobs over both transports, TestRelayThroughput), and
// each idle P beyond it costs a booting sandbox CPU in the scheduler and
// threads that every later pivot_root on the host walks (issue 23).
var sandboxGOMAXPROCS = "1"

// sandboxSpareThreads is how many idle threads PID 1 starts at boot for
// later (spareThreads).
var sandboxSpareThreads = 3

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
	writeIdentityIfRequested()
	jobroot.RunIfRequested()
	runLauncherIfRequested()
	if os.Getenv(sandboxEnv) == "" {
		return
	}
	log := logging.FromEnv(os.Stderr)
	if err := runSandbox(log); err != nil {
		log.Error("sandbox failed", "err", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// fatalSignals are the signals that would make the Go runtime end PID 1.
// Jobs run as the same host uid as PID 1 and may signal it; ignoring these
// keeps a job from killing its own sandbox's SSH server. SIGKILL from the
// host still works.
var fatalSignals = []os.Signal{
	unix.SIGHUP, unix.SIGINT, unix.SIGTERM, unix.SIGQUIT, unix.SIGILL, unix.SIGTRAP,
	unix.SIGABRT, unix.SIGSTKFLT, unix.SIGSYS, unix.SIGSEGV, unix.SIGBUS, unix.SIGFPE,
	unix.SIGUSR1, unix.SIGUSR2, unix.SIGALRM, unix.SIGVTALRM, unix.SIGXCPU, unix.SIGXFSZ,
	unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU, unix.SIGPWR,
}

// ignoreFatalSignals makes the fatal signals harmless to this process:
// caught and dropped rather than ignored, because an ignored signal stays
// ignored across exec, and every job would start with SIGTERM, SIGINT,
// SIGHUP... ignored (`timeout` or `kill` could not stop its commands). A
// caught signal is reset to its default in the new program.
func ignoreFatalSignals() {
	signal.Notify(make(chan os.Signal, 1), fatalSignals...) // never read: dropped
}

// runSandbox sets up the sandbox as PID 1 of its namespaces and serves SSH.
// It returns only on failure, or in probe mode once the setup worked.
func runSandbox(log *slog.Logger) error {
	var cfg sandboxConfig
	cf := os.NewFile(configFD, "config")
	if err := json.NewDecoder(cf).Decode(&cfg); err != nil {
		return fmt.Errorf("read sandbox config: %w", err)
	}
	cf.Close()
	log = log.With("instance", cfg.ID)
	// Before anything starts a process: no job may inherit a descriptor
	// this process got, neither berth's sockets (disk poller, exec) nor
	// whatever berth itself inherited without close-on-exec from its own
	// parent (seen: a pipe of `go test`).
	if err := cloexec.Inherited(); err != nil {
		log.Warn("cannot mark inherited descriptors close-on-exec (kernel before 5.11?); jobs may inherit some", "err", err)
	}
	// Nothing the sandbox starts may inherit berth's disk poller socket.
	var diskHost *os.File
	if cfg.DiskPoller {
		if err := unix.SetNonblock(diskPollFD, true); err != nil {
			return fmt.Errorf("disk poller socket: %w", err)
		}
		unix.CloseOnExec(diskPollFD)
		diskHost = os.NewFile(diskPollFD, "disk-poller")
	}
	var execSock *os.File
	if cfg.Exec {
		if !cfg.DiskPoller {
			unix.Close(diskPollFD) // a placeholder
		}
		var err error
		if execSock, err = takeExecSocket(); err != nil {
			return fmt.Errorf("exec socket: %w", err)
		}
	}
	ignoreFatalSignals()
	if err := limitNoFile(); err != nil {
		return err
	}
	// Nobody else may read this process's memory (it holds the host key)
	// or its descriptors through /proc: jobs run as the same host uid, but
	// without privileges in this user namespace.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE): %w", err)
	}

	// Record who we are in host terms while the host's /proc is still
	// mounted: /proc/self resolves in the PID namespace of the procfs, not
	// ours, so this is our host PID.
	pidf := os.NewFile(pidFD, "pid")
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
		if _, err := fmt.Fprintf(pidf, "%d %d\n", pid, start); err != nil {
			return err
		}
	}
	pidf.Close()
	ready := os.NewFile(readyFD, "ready")

	var server *ssh.ServerConfig
	if !cfg.Probe {
		var err error
		server, err = serverConfig(cfg.HostKey, cfg.AuthorizedKey)
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
	if err := setupRoot(cfg); err != nil {
		return err
	}
	imageJobs := ""
	if !cfg.Probe {
		imageJobs = keepImageJobsDir(log)
	}
	jobs, err := newJobNS()
	if err != nil {
		return err
	}
	// From here on PID 1 starts processes only from the job thread,
	// which carries the seccomp filter; the image launcher starts later,
	// for the first image job, if any (jobroot_linux.go).
	spawn, err := newJobThread(cfg.ImageBuilds)
	if err != nil {
		return err
	}
	spareThreads(sandboxSpareThreads)
	r := newReaper(spawn)
	go r.run()
	if cfg.Probe {
		return probeCommand(r, jobs)
	}

	f := os.NewFile(listenerFD, "ssh-listener")
	ln, err := net.FileListener(f)
	if err != nil {
		return fmt.Errorf("inherited SSH listener: %w", err)
	}
	f.Close()

	if err := limitProcs(cfg.NProc); err != nil {
		return err
	}
	s := &sshd{config: server, reaper: r, log: log, hostname: cfg.ID, jobs: jobs,
		launcher: &imageLauncher{cfg: cfg, spawn: spawn}}
	if spawn.listener >= 0 {
		s.notes = &mountNotes{listener: spawn.listener, log: log}
		go s.notes.serve()
	}
	if cfg.DiskMax > 0 || cfg.DiskReserve > 0 || cfg.InodesMax > 0 || cfg.InodesReserve > 0 {
		limit := cfg.DiskMax
		if limit <= 0 {
			limit = math.MaxInt64 / 2 // the reserve alone
		}
		w := &diskWatch{limit: limit, reserve: cfg.DiskReserve, inodeLimit: cfg.InodesMax, inodeReserve: cfg.InodesReserve,
			dirs: watchedDirs(imageJobs), log: log, host: diskHost,
			over: func(_ int64, msg string) { s.diskOver(msg, imageJobs) }}
		go w.run()
	}
	if execSock != nil {
		go s.serveExec(execSock)
	}
	fmt.Fprintln(ready, "ready")
	ready.Close()
	log.Info("sandbox serving SSH", "addr", ln.Addr().String())
	return s.serve(ln)
}

// probeCommand runs one command the way jobs run, so that a probe sandbox
// fails when nested namespaces or the seccomp filter break commands.
func probeCommand(r *reaper, jobs jobNS) error {
	null, err := os.OpenFile("/dev/null", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer null.Close()
	_, wait, err := r.start("/bin/sh", []string{"sh", "-c", "exit 7"}, &os.ProcAttr{
		Dir: "/berth", Files: []*os.File{null, null, null}, Sys: jobs.sysProcAttr(),
	})
	if err != nil {
		return fmt.Errorf("start a command in the sandbox: %w", err)
	}
	if ws := <-wait; ws.ExitStatus() != 7 {
		return fmt.Errorf("test command in the sandbox ended with %v, want exit status 7", ws)
	}
	return nil
}

// serverConfig loads the host key and allows only the group's client key.
func serverConfig(hostKeyPEM, authorized string) (*ssh.ServerConfig, error) {
	hostKey, err := ssh.ParsePrivateKey([]byte(hostKeyPEM))
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

// reaper is PID 1's child reaper. Orphans of the whole sandbox end up as our
// children; wait4(-1) collects them. Commands we start ourselves register
// first so their exit status reaches the session that waits for it (we must
// not use exec.Cmd.Wait, which would race with wait4(-1)).
type reaper struct {
	mu      sync.Mutex
	waiters map[int]chan unix.WaitStatus
	sig     chan os.Signal
	spawn   *jobThread // starts every process, under the seccomp filter
}

func newReaper(spawn *jobThread) *reaper {
	r := &reaper{waiters: map[int]chan unix.WaitStatus{}, sig: make(chan os.Signal, 1), spawn: spawn}
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

// start starts a process from the job thread, so that it inherits the
// seccomp filter, and registers it before the reaper can see it exit.
func (r *reaper) start(argv0 string, argv []string, attr *os.ProcAttr) (int, <-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var p *os.Process
	var err error
	r.spawn.do(func() { p, err = os.StartProcess(argv0, argv, attr) })
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
