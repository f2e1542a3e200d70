package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/jobroot"
)

// Jobs in images get the sandbox's own seccomp filter and no_new_privs
// before their command starts, so they end up under the same restrictions
// as plain jobs. With image_builds the launcher starts runners with
// runnerBuildsArg, and their jobs get the filter of plain jobs with
// image_builds, their command in one more user namespace (jobroot.Mounts):
// their init mounts the /proc masks in a user namespace it owns, and only
// a nested one locks them against the unmounting and binds allowed.
func init() {
	jobroot.Harden = func() error { _, err := loadSeccomp(true, mountsRefused); return err }
	jobroot.HardenMounts = func() error { _, err := loadSeccomp(true, mountsForBuilds); return err }
	jobroot.Mounts = func() bool { return len(os.Args) == 2 && os.Args[1] == runnerBuildsArg }
}

// runnerBuildsArg is the argument the launcher starts runners with under
// image_builds: an argument, which a job's variables cannot set (the
// session's environment reaches the runner).
const runnerBuildsArg = "image-builds"

// Jobs in images need mounts (an overlay root per job), which the sandbox's
// seccomp filter denies to everything PID 1 starts. So for the sandbox's
// first image job PID 1 starts the launcher from one of its own threads,
// which the filter does not cover yet (only the job thread has it,
// jobthread_linux.go), and then seals itself: every thread of PID 1 gets the
// filter. The launcher is a copy of PID 1's binary, in a mount namespace of
// its own, that holds the instance's image cache and starts berth's job
// runner (package jobroot) for the sessions that ask for it. The runner
// builds the job's root and applies the same filter to the job before its
// command runs. The launcher is reachable only through a socket pair PID 1
// holds; jobs cannot reach it, its memory (not dumpable, ptrace denied) or
// the image cache (mounted in the launcher's namespace only), and
// recycling spares it. Only the image session path (isRunnerCommand, over
// SSH or local exec, both authenticated as berth) starts it.
const (
	// imagesDir is the instance's image cache directory.
	imagesDir = "images"
	// imagesFD is the image cache directory a sandbox inherits (after
	// diskFD and tmpFD: command hands instanceDirs over in order).
	imagesFD = 9
	// launcherEnv marks the re-executed binary as the launcher; its value
	// is "detached" when the cache arrives as a detached mount.
	launcherEnv = "BERTH_LOCAL_LAUNCHER"
	// launcherCache is where the launcher mounts the image cache, in its
	// own mount namespace (it covers the instance's /tmp there only).
	launcherCache = "/tmp"
	// launcherNoteEnv carries what to tell a job whose registry is
	// unreachable from this sandbox.
	launcherNoteEnv = "BERTH_LOCAL_LAUNCHER_NOTE"
	// launcherBuildsEnv is "1" with provider_config image_builds.
	launcherBuildsEnv = "BERTH_LOCAL_LAUNCHER_BUILDS"
)

// instanceDirs are the directories of an instance a sandbox is given.
var instanceDirs = []string{diskDir, tmpDir, imagesDir}

// launcherPID is the sandbox's launcher, spared by recycle; 0 when none.
var launcherPID atomic.Int32

// imageLauncher starts the launcher on first use, once.
type imageLauncher struct {
	cfg   sandboxConfig
	spawn *jobThread

	mu      sync.Mutex
	started bool     // tried, whatever the outcome: never again
	sock    *os.File // PID 1's end of the socket pair; nil when it failed
	err     error
}

// socket returns the socket to the launcher, starting it and sealing PID 1
// the first time. Concurrent callers wait for the one that starts it.
func (l *imageLauncher) socket() (*os.File, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return l.sock, l.err
	}
	l.started = true
	sock, err := startLauncher(l.cfg)
	// Sealed whatever happened: from now on nothing in the sandbox needs
	// an unfiltered thread.
	if serr := l.spawn.seal(); serr != nil {
		if sock != nil {
			unix.Kill(int(launcherPID.Load()), unix.SIGKILL)
			launcherPID.Store(0)
			sock.Close()
		}
		sock, err = nil, serr
	}
	l.sock, l.err = sock, err
	return sock, err
}

// usable says whether image jobs may work: false once starting the
// launcher failed.
func (l *imageLauncher) usable() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.started || l.sock != nil
}

// startLauncher starts the launcher from a thread the sandbox's seccomp
// filter does not cover (it needs the mount calls) and returns PID 1's end
// of its socket pair.
func startLauncher(cfg sandboxConfig) (*os.File, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if mode, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err != nil || mode != 0 {
		return nil, fmt.Errorf("start the image launcher: PID 1's thread is already under seccomp (mode %d, %v)", mode, err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("launcher socket pair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "launcher"), os.NewFile(uintptr(fds[1]), "launcher-child")
	defer theirs.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		ours.Close()
		return nil, err
	}
	defer null.Close()
	cache := os.NewFile(imagesFD, "images")
	defer cache.Close()
	mode := "detached" // see cloneImagesDir
	note := ""
	if cfg.Network == "isolated" {
		// berth's manager pulls on the host (provider.ImageCacher) and
		// has the runner use the cache only; this is for other callers.
		note = `this local instance has network = "isolated" and cannot reach registries itself: run the job through berth, which pulls images on the host into the instance's cache (Provider.ImageCache), or set network = "host" in [autoscaler.provider_config]`
	}
	builds := ""
	if cfg.ImageBuilds {
		builds = "1"
	}
	p, err := os.StartProcess("/proc/self/exe", []string{"berth-launcher", cfg.ID}, &os.ProcAttr{
		// GOMAXPROCS as PID 1's: the launcher only starts runners, which
		// get the session's environment, not this one.
		Env: []string{launcherEnv + "=" + mode, launcherNoteEnv + "=" + note, launcherBuildsEnv + "=" + builds,
			"GOMAXPROCS=" + sandboxGOMAXPROCS, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Files: []*os.File{null, os.Stderr, os.Stderr, theirs, cache},
		Sys:   &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS},
	})
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("start the image launcher: %w", err)
	}
	launcherPID.Store(int32(p.Pid))
	p.Release()
	return ours, nil
}

// runLauncherIfRequested runs the launcher when this process is one.
func runLauncherIfRequested() {
	mode := os.Getenv(launcherEnv)
	if mode == "" {
		return
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := runLauncher(mode); err != nil {
		log.Error("image launcher failed", "err", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runLauncher(mode string) error {
	ignoreFatalSignals()
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return err
	}
	// The runner mounts a fresh /proc for each job, which the kernel allows
	// only while this namespace's /proc is fully visible; the job's /proc
	// gets the sandbox's masks again (jobroot.MaskProc).
	if err := jobroot.UnmaskProc("/proc"); err != nil {
		return err
	}
	if err := unix.MoveMount(4, "", unix.AT_FDCWD, launcherCache, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount the image cache: %w", err)
	}
	unix.Close(4)
	for {
		env, files, err := receiveRequest(3)
		if err != nil {
			return err
		}
		if files == nil {
			return nil // PID 1 is gone
		}
		go serveRunner(env, files)
	}
}

// launchRequest is PID 1's request to start the runner for one session.
type launchRequest struct {
	Env []string `json:"env"`
}

// launchReply is the launcher's answer: the runner's PID, then its status.
type launchReply struct {
	PID    int    `json:"pid,omitempty"`
	Status uint32 `json:"status"`
	Err    string `json:"err,omitempty"`
}

// receiveRequest reads one request with its four descriptors (stdin,
// stdout, stderr, the reply socket); files is nil at EOF.
func receiveRequest(fd int) ([]string, []*os.File, error) {
	buf := make([]byte, 64<<10)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("receive a launch request: %w", err)
	}
	if n == 0 && oobn == 0 {
		return nil, nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, nil, fmt.Errorf("launch request without descriptors")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 4 {
		for _, f := range fds {
			unix.Close(f)
		}
		return nil, nil, fmt.Errorf("launch request with %d descriptors, want 4", len(fds))
	}
	var req launchRequest
	if err := json.Unmarshal(buf[:n], &req); err != nil {
		return nil, nil, err
	}
	files := make([]*os.File, 4)
	for i, f := range fds {
		files[i] = os.NewFile(uintptr(f), "fd"+strconv.Itoa(i))
	}
	return req.Env, files, nil
}

// serveRunner starts berth's job runner with the session's stdio and
// reports its PID and exit status.
func serveRunner(env []string, files []*os.File) {
	reply := files[3]
	defer reply.Close()
	var clean []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "BERTH_") {
			clean = append(clean, kv)
		}
	}
	clean = append(clean, "BERTH_JOBROOT=run", "BERTH_JOBROOT_CACHE="+launcherCache, "BERTH_JOBROOT_UNREACHABLE="+os.Getenv(launcherNoteEnv))
	argv := []string{"berth-jobroot"}
	if os.Getenv(launcherBuildsEnv) == "1" {
		argv = append(argv, runnerBuildsArg)
	}
	p, err := os.StartProcess("/proc/self/exe", argv, &os.ProcAttr{
		Dir: "/berth", Env: clean, Files: files[:3], Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	for _, f := range files[:3] {
		f.Close()
	}
	if err != nil {
		b, _ := json.Marshal(launchReply{Err: err.Error()})
		reply.Write(b)
		return
	}
	b, _ := json.Marshal(launchReply{PID: p.Pid})
	reply.Write(b)
	ps, err := p.Wait()
	status := uint32(255 << 8)
	if err == nil {
		status = uint32(ps.Sys().(syscall.WaitStatus))
	}
	b, _ = json.Marshal(launchReply{Status: status})
	reply.Write(b)
}

// isRunnerCommand tells the executor's runner invocation from any other
// command: such sessions go to the launcher instead of a shell.
func isRunnerCommand(argv []string) bool {
	return len(argv) == 3 && argv[2] == "BERTH_JOBROOT=run berth"
}

// startRunner has the launcher start the job runner with the channel as
// its stdio; it stands in for sshd.start.
func (s *sshd) startRunner(ch cmdIO, _, env []string) (int, <-chan unix.WaitStatus, error) {
	if s.launcher == nil {
		return 0, nil, errors.New("this sandbox has no image launcher")
	}
	// Not while a recycle kills every process: it spares the launcher
	// only once launcherPID names it.
	s.recycling.Lock()
	launcherSock, err := s.launcher.socket()
	s.recycling.Unlock()
	if err != nil {
		return 0, nil, err
	}
	stdio, local, err := channelPipes(ch)
	if err != nil {
		return 0, nil, err
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		closeAll(stdio)
		closeAll(local)
		return 0, nil, err
	}
	b, _ := json.Marshal(launchRequest{Env: env})
	rights := unix.UnixRights(int(stdio[0].Fd()), int(stdio[1].Fd()), int(stdio[2].Fd()), pair[1])
	err = unix.Sendmsg(int(launcherSock.Fd()), b, rights, nil, 0)
	closeAll(stdio)
	unix.Close(pair[1])
	reply := os.NewFile(uintptr(pair[0]), "launch-reply")
	var first launchReply
	if err == nil {
		err = readReply(reply, &first)
	}
	if err == nil && first.Err != "" {
		err = errors.New(first.Err)
	}
	if err != nil {
		reply.Close()
		closeAll(local)
		return 0, nil, fmt.Errorf("start the job runner: %w", err)
	}
	done := make(chan unix.WaitStatus, 1)
	copied := copyChannel(ch, local)
	go func() {
		var last launchReply
		if readReply(reply, &last) != nil {
			last.Status = 255 << 8
		}
		reply.Close()
		<-copied
		done <- unix.WaitStatus(last.Status)
	}()
	return first.PID, done, nil
}

func readReply(f *os.File, r *launchReply) error {
	buf := make([]byte, 4096)
	n, err := f.Read(buf)
	if err != nil {
		return err
	}
	return json.Unmarshal(buf[:n], r)
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// killJobs kills every process of the sandbox but PID 1 and the launcher.
func killJobs() error {
	spare := launcherPID.Load()
	if spare == 0 {
		return unix.Kill(-1, unix.SIGKILL)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == 1 || int32(pid) == spare {
			continue
		}
		unix.Kill(pid, unix.SIGKILL)
	}
	return nil
}

// isLauncher says whether a /proc entry is the launcher.
func isLauncher(name string) bool {
	spare := launcherPID.Load()
	return spare != 0 && name == strconv.Itoa(int(spare))
}

type sshChannel = cmdIO

// channelPipes makes a command's three pipes: stdio are the ends the
// command gets, local the ends copied to and from the channel.
func channelPipes(ch sshChannel) (stdio, local []*os.File, err error) {
	for i := 0; i < 3; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(stdio)
			closeAll(local)
			return nil, nil, err
		}
		if i == 0 {
			stdio, local = append(stdio, r), append(local, w)
		} else {
			stdio, local = append(stdio, w), append(local, r)
		}
	}
	return stdio, local, nil
}

// copyChannel copies the channel to the command's stdin and its output to
// the channel; the returned channel closes once all output is copied.
func copyChannel(ch sshChannel, local []*os.File) <-chan struct{} {
	go func() {
		io.Copy(local[0], ch)
		local[0].Close()
	}()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { io.Copy(ch, local[1]); local[1].Close(); wg.Done() }()
	go func() { io.Copy(ch.Stderr(), local[2]); local[2].Close(); wg.Done() }()
	go func() { wg.Wait(); close(done) }()
	return done
}

// ensureImagesDir creates the image cache of an instance made before
// instances had one.
func (p *Provider) ensureImagesDir(dir string) error {
	d := filepath.Join(dir, imagesDir)
	if _, err := os.Stat(d); err == nil {
		return nil
	}
	if err := os.Mkdir(d, 0o755); errors.Is(err, os.ErrExist) {
		return nil // another job on this instance made it meanwhile
	} else if err != nil {
		return fmt.Errorf("make the instance's image cache: %w", err)
	}
	if p.asRoot {
		return os.Chown(d, p.uids.Base, p.gids.Base)
	}
	return nil
}

// cloneImagesDir makes fd imagesFD a detached copy (open_tree) of the
// instance's image cache, as the provider hands it over when berth runs as
// root. Unprivileged, the sandbox reaches the directory by path, and only
// now, before its root covers the host's: a bind from a descriptor of
// this mount namespace would fail in the launcher's.
func cloneImagesDir(cfg sandboxConfig) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, filepath.Join(cfg.Dir, imagesDir), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("open the instance's image cache: %w", err)
	}
	defer unix.Close(fd)
	return unix.Dup3(fd, imagesFD, unix.O_CLOEXEC)
}
