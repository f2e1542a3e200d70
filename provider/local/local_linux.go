package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/internal/diskfull"
	"github.com/berth-ci/berth/internal/localexec"
	"github.com/berth-ci/berth/internal/logging"
	"github.com/berth-ci/berth/provider"

	"github.com/berth-ci/berth/internal/atomicfile"
)

// Version is reported in provider.Info.
const Version = "0.1.0"

// bootTimeout is how long a started sandbox may take to serve SSH before
// Update reports it as timed out.
const bootTimeout = 2 * time.Minute

// Provider is the local sandbox provider. Create it with New (or
// provider.New("local")) and call Init before anything else. It is safe for
// concurrent use; one state directory must be used by one berth process at a
// time.
type Provider struct {
	cfg       Config
	dir       string // <StateDir>/local
	group     string // short hash naming this group
	stateDir  string
	masks     []string // directories sandboxes cover: they hold berth's private files
	signer    ssh.Signer
	clientPEM []byte
	clientPub string // authorized_keys line
	// asRoot is true when berth runs as root; sandboxes then map their
	// IDs to the subordinate ranges uids and gids, never to host root.
	asRoot     bool
	uids, gids idRange
	cgroups    *cgroupRoot
	diskMax    int64 // disk_max in bytes, 0 for none
	// diskReserve is disk_reserve in bytes, 0 for none.
	diskReserve int64
	// inodesMax and inodesReserve are inodes_max and inodes_reserve, 0
	// for none.
	inodesMax, inodesReserve int64
	slots                    int // capacity_per_instance, 0 when unknown
	log                      *slog.Logger
	sandboxBin               *sandboxBinary // berth-sandbox, or nil: sandboxes start from this binary

	mu       sync.Mutex
	locks    map[string]*sync.Mutex // per-instance operation locks
	watcher  *readyWatcher          // set by Notify; nil until someone listens
	disks    *diskPoller            // made by the first start with disk_max
	noDisks  bool                   // making it failed: sandboxes poll themselves
	seen     map[string]*observed   // Update's cache, see observed
	children map[string]child       // sandboxes this process started, by ID
	execs    execs                  // their exec sockets (localexec_linux.go)
	spawners spawners               // the sandbox spawner (spawnerclient_linux.go)
}

// New returns an uninitialised local provider.
func New() *Provider {
	return &Provider{locks: map[string]*sync.Mutex{}, seen: map[string]*observed{}, children: map[string]child{},
		log: slog.Default().With("provider", Name)}
}

var idPattern = regexp.MustCompile(`^local-[0-9a-f]{10}$`)

func checkID(id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("local provider: %q is not an instance ID of this provider (IDs look like local-0123456789)", id)
	}
	return nil
}

// Init reads the configuration, prepares the state directory and the group's
// client key, and checks that sandboxes can be started here by starting a
// short-lived probe sandbox.
func (p *Provider) Init(ctx context.Context, s provider.Settings) (provider.Info, error) {
	cfg, err := parseConfig(s.Config)
	if err != nil {
		return provider.Info{}, err
	}
	p.cfg = cfg
	p.slots = s.Capacity
	if s.StateDir == "" {
		return provider.Info{}, errors.New("local provider: no state directory given; set state_dir")
	}
	abs, err := filepath.Abs(s.StateDir)
	if err != nil {
		return provider.Info{}, fmt.Errorf("local provider: state dir: %w", err)
	}
	p.stateDir = abs
	p.dir = filepath.Join(abs, "local")
	sum := sha256.Sum256([]byte(p.dir))
	p.group = hex.EncodeToString(sum[:4])
	if err := os.MkdirAll(filepath.Join(p.dir, "instances"), 0o700); err != nil {
		return provider.Info{}, fmt.Errorf("local provider: create state dir: %w", err)
	}
	if p.masks, err = privateMasks(p.cfg.HostPaths, append(append([]string(nil), s.Private...), abs)); err != nil {
		return provider.Info{}, err
	}
	if err := p.loadClientKey(); err != nil {
		return provider.Info{}, err
	}
	p.asRoot = os.Geteuid() == 0
	if err := checkGroups(p.cfg.KeepGroups, p.cfg.HostPaths, p.masks, p.log); err != nil {
		return provider.Info{}, err
	}
	if p.asRoot {
		p.uids, p.gids = subIDs()
		p.cgroups = newCgroupRoot(p.group)
	}
	if err := p.checkLimits(); err != nil {
		return provider.Info{}, err
	}
	p.diskMax = defaultDiskMax(p.dir)
	if p.cfg.DiskMax != "" {
		p.diskMax, _ = parseSize(p.cfg.DiskMax) // checked by parseConfig
	}
	p.diskReserve = defaultDiskReserve(p.dir)
	if p.cfg.DiskReserve != "" {
		p.diskReserve, _ = parseSize(p.cfg.DiskReserve) // checked by parseConfig
	}
	p.inodesMax, p.inodesReserve = defaultInodesMax(p.dir), defaultInodesReserve(p.dir)
	if p.cfg.InodesMax != nil {
		p.inodesMax = *p.cfg.InodesMax
	}
	if p.cfg.InodesReserve != nil {
		p.inodesReserve = *p.cfg.InodesReserve
	}
	p.log.Info("local provider ready", "network", p.cfg.Network, "host_paths", p.cfg.HostPaths, "hidden", p.masks,
		"as_root", p.asRoot, "uid_base", p.uids.Base, "cgroups", p.cgroups != nil, "disk_max", p.diskMax, "disk_reserve", p.diskReserve,
		"inodes_max", p.inodesMax, "inodes_reserve", p.inodesReserve)
	checkPidMax(p.log)
	p.cleanLeftovers()
	p.sandboxBin = findSandboxBinary(ctx, p.log, sandboxBinaryDir())
	if err := p.probe(ctx); err != nil {
		// A full disk makes the probe fail too: say so rather than blame
		// namespaces (issue 9).
		if full := diskfull.Explain(p.dir, err); full != nil {
			return provider.Info{}, fmt.Errorf("local provider: cannot start a sandbox: %w", full)
		}
		return provider.Info{}, fmt.Errorf(`local provider: cannot start sandboxes on this machine: %w; if namespaces are unavailable (containers without CAP_SYS_ADMIN, kernels or AppArmor policies that forbid unprivileged user namespaces), use provider "sim" or an external plugin instead`, err)
	}
	return provider.Info{
		ID:      "local/" + p.group,
		Version: Version,
		// Disposable: a sandbox is made from the image in moments.
		Capabilities: provider.Capabilities{Suspend: true, Notify: canNotify(), Recycle: true, Disposable: true},
	}, nil
}

// loadClientKey loads the group's client key, creating it on first use.
func (p *Provider) loadClientKey() error {
	path := filepath.Join(p.dir, "client_key")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		b, err = newKeyPEM("berth-local-client")
		if err == nil {
			err = atomicfile.Write(path, b, 0o600)
		}
	}
	if err != nil {
		return fmt.Errorf("local provider: client key %s: %w", path, err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return fmt.Errorf("local provider: parse client key %s: %w (delete it to generate a new one; running instances then need recreating)", path, err)
	}
	p.signer, p.clientPEM = signer, b
	p.clientPub = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey())))
	return nil
}

// cleanLeftovers removes directories of interrupted creations and
// deletions. Their sandboxes never started or are known to be dead.
func (p *Provider) cleanLeftovers() {
	entries, _ := os.ReadDir(filepath.Join(p.dir, "instances"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			removeAll(filepath.Join(p.dir, "instances", e.Name()))
			continue
		}
		p.sweepImageCache(e.Name())
	}
	if p.cgroups != nil {
		p.cleanCgroups(p.cgroups.dir)
		if p.cgroups.pidsV1 != "" {
			p.cleanCgroups(p.cgroups.pidsV1)
		}
	}
}

// cleanCgroups removes the instance cgroups under dir that no instance
// directory records: create makes them before the directory is renamed
// into place, so a crash in between leaves them behind. No sandbox ever
// ran in one (sandboxes start after the rename), and rmdir refuses a
// cgroup that has processes anyway.
func (p *Provider) cleanCgroups(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() || checkID(e.Name()) != nil {
			continue
		}
		if _, err := os.Lstat(p.instDir(e.Name())); errors.Is(err, os.ErrNotExist) {
			if os.Remove(filepath.Join(dir, e.Name())) == nil {
				p.log.Info("removed the cgroup of an instance whose creation was interrupted", "cgroup", filepath.Join(dir, e.Name()))
			}
		}
	}
}

// removeAll is os.RemoveAll that also copes with directories a job made
// unwritable.
func removeAll(path string) error {
	if err := os.RemoveAll(path); err == nil {
		return nil
	}
	filepath.Walk(path, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(path)
}

func (p *Provider) instDir(id string) string {
	return filepath.Join(p.dir, "instances", id)
}

// lock serialises operations on one instance.
func (p *Provider) lock(id string) func() {
	p.mu.Lock()
	l, ok := p.locks[id]
	if !ok {
		l = &sync.Mutex{}
		p.locks[id] = l
	}
	p.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// probe starts a sandbox that only sets up its namespaces and file system
// and exits, so that Init fails early with the real reason.
func (p *Provider) probe(ctx context.Context) error {
	dir, err := os.MkdirTemp(filepath.Join(p.dir, "instances"), ".probe-")
	if err != nil {
		return err
	}
	defer removeAll(dir)
	for _, d := range instanceDirs {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := p.chownInstance(dir); err != nil {
		return err
	}
	sc := p.sandboxConfig("probe", "")
	sc.Dir = dir
	cmd, err := p.command(dir, nil, "", sc, nil, nil)
	if err != nil {
		return err
	}
	err = cmd.Start()
	closeCmdFiles(cmd)
	if err != nil {
		return fmt.Errorf("start probe sandbox: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		err = errors.New("probe sandbox did not finish within 30s")
	case <-ctx.Done():
		cmd.Process.Kill()
		<-done
		return ctx.Err()
	}
	if err != nil {
		out, _ := os.ReadFile(filepath.Join(dir, logFile))
		return fmt.Errorf("probe sandbox: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// sandboxConfig is what a sandbox of this provider is told at start.
func (p *Provider) sandboxConfig(id, hostKey string) sandboxConfig {
	return sandboxConfig{
		ID: id, Network: p.cfg.Network, AuthorizedKey: p.clientPub, HostKey: hostKey,
		HostPaths: p.cfg.HostPaths, Masks: p.masks, Probe: id == "probe", DetachedMounts: p.asRoot, DiskMax: p.diskMax, DiskReserve: p.diskReserve,
		InodesMax: p.inodesMax, InodesReserve: p.inodesReserve, Slots: p.slots, ImageBuilds: p.cfg.ImageBuilds,
	}
}

// chownInstance gives the directories a sandbox writes to (disk, tmp) to
// the sandbox's root when berth runs as root; unprivileged, the caller's
// uid is the sandbox's root already.
func (p *Provider) chownInstance(dir string) error {
	if !p.asRoot {
		return nil
	}
	for _, d := range instanceDirs {
		if err := os.Chown(filepath.Join(dir, d), p.uids.Base, p.gids.Base); err != nil {
			return fmt.Errorf("give %s to the sandbox's uid %d: %w", d, p.uids.Base, err)
		}
	}
	return nil
}

// command prepares the re-execution of this binary as the sandbox of dir.
// Everything the sandbox needs from its directory is handed over as
// inherited descriptors (see listenerFD and the constants after it): the
// configuration through a pipe, the pid and ready files opened for writing,
// the disk and tmp directories as O_PATH descriptors. The new process gets
// its own session so that it outlives berth.
func (p *Provider) command(dir string, ln *os.File, cgroup string, sc sandboxConfig, diskPoll, execSock *os.File) (*exec.Cmd, error) {
	var files []*os.File
	if diskPoll != nil {
		files = append(files, diskPoll)
	}
	if execSock != nil {
		files = append(files, execSock)
	}
	fail := func(err error) (*exec.Cmd, error) {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
		return nil, err
	}
	if err := p.ensureImagesDir(dir); err != nil {
		return fail(err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fail(err)
	}
	files = append(files, logf)
	if ln == nil {
		// A probe serves nothing; fd 3 must still be taken.
		if ln, err = os.Open(os.DevNull); err != nil {
			return fail(err)
		}
		files = append(files, ln)
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return fail(err)
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	files = append(files, cfgR)
	// A few kilobytes fit the pipe buffer: no reader is needed yet.
	_, err = cfgW.Write(b)
	cfgW.Close()
	if err != nil {
		return fail(err)
	}
	extra := []*os.File{ln, cfgR}
	for _, name := range []string{pidFile, readyFile} {
		path := filepath.Join(dir, name)
		if sc.Probe {
			path = os.DevNull
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return fail(err)
		}
		files = append(files, f)
		extra = append(extra, f)
	}
	for _, name := range instanceDirs {
		// As root, the sandbox's uid may not reach the instance
		// directory, and a descriptor of the host's mount namespace
		// cannot be bound in another; a detached copy of the mount
		// (open_tree) can be moved into it. Unprivileged, the sandbox
		// binds the directory by path (sc.Dir) and only needs fd 7 and 8
		// to be taken.
		path := filepath.Join(dir, name)
		var fd int
		var err error
		if p.asRoot {
			fd, err = unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		} else {
			fd, err = unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		}
		if err != nil {
			return fail(fmt.Errorf("open %s: %w", name, err))
		}
		f := os.NewFile(uintptr(fd), name)
		files = append(files, f)
		extra = append(extra, f)
	}
	if diskPoll != nil {
		extra = append(extra, diskPoll) // diskPollFD
	}
	if execSock != nil {
		if diskPoll == nil {
			// diskPollFD must be taken; the sandbox closes it.
			null, err := os.Open(os.DevNull)
			if err != nil {
				return fail(err)
			}
			files = append(files, null)
			extra = append(extra, null)
		}
		extra = append(extra, execSock) // execFD
	}
	cmd := exec.Command(p.sandboxBin.exe())
	cmd.Args = []string{"berth-sandbox", sc.ID}
	// A clean environment: berth's own (possibly secrets) must not leak
	// into the instances.
	cmd.Env = []string{sandboxEnv + "=" + dir, "GOMAXPROCS=" + sandboxGOMAXPROCS, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	if v, ok := os.LookupEnv("GORACE"); ok {
		cmd.Env = append(cmd.Env, "GORACE="+v)
	}
	cmd.Env = append(cmd.Env, logging.Env()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = extra
	flags := uintptr(unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC)
	if p.cfg.Network == "isolated" {
		flags |= unix.CLONE_NEWNET
	}
	// Always a user namespace. Unprivileged, the caller's uid becomes
	// root inside; as root, the sandbox's IDs map to a subordinate range,
	// never to host root, so root inside holds no privilege on the host.
	attr := &syscall.SysProcAttr{Setsid: true, Cloneflags: flags}
	if p.asRoot {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: p.uids.Base, Size: p.uids.Size}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: p.gids.Base, Size: p.gids.Size}}
		attr.GidMappingsEnableSetgroups = true
		// Become the range's first ID: host root itself is not mapped.
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0}
	} else {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	if cgroup != "" {
		fd, err := unix.Open(cgroup, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(fmt.Errorf("open cgroup %s: %w", cgroup, err))
		}
		attr.UseCgroupFD, attr.CgroupFD = true, fd
	}
	cmd.SysProcAttr = attr
	cmdFiles.Store(cmd, files)
	return cmd, nil
}

// cmdFiles remembers, per prepared command, the descriptors command opened
// in this process, so that closeCmdFiles can release them.
var cmdFiles sync.Map // *exec.Cmd -> []*os.File

// closeCmdFiles releases what command opened in this process once the
// child has its copies (or failed to start).
func closeCmdFiles(cmd *exec.Cmd) {
	if v, ok := cmdFiles.LoadAndDelete(cmd); ok {
		for _, f := range v.([]*os.File) {
			f.Close()
		}
	}
	if cmd.SysProcAttr.UseCgroupFD {
		unix.Close(cmd.SysProcAttr.CgroupFD)
	}
}

// Increase creates and starts n sandboxes. It returns once their processes
// are started; they report "creating" until their SSH server serves.
//
// Sandboxes are created createConcurrency at a time: one by one, a burst of
// 1,000 took a minute on two cores before the last one even started booting,
// while most of a creation is waiting on the file system and on fork/exec.
// The first error stops further creations; the count says how many exist.
func (p *Provider) Increase(ctx context.Context, n int) (int, error) {
	var (
		mu       sync.Mutex
		created  int
		firstErr error
		wg       sync.WaitGroup
		next     = make(chan struct{})
	)
	for range min(n, createConcurrency) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				err := p.create()
				mu.Lock()
				if err == nil {
					created++
				} else if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	if firstErr == nil && created < n {
		firstErr = ctx.Err()
	}
	return created, firstErr
}

// createConcurrency bounds the sandboxes one Increase creates at once.
const createConcurrency = 16

func (p *Provider) create() error {
	var rnd [5]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	id := "local-" + hex.EncodeToString(rnd[:])
	// Build the directory under a dot name and rename it into place, so
	// Update never sees a half-made instance.
	tmp := filepath.Join(p.dir, "instances", ".new-"+id)
	var undo func()
	fail := func(err error) error {
		if undo != nil {
			undo()
		}
		p.forget(id) // what saveMeta remembered
		removeAll(tmp)
		return fmt.Errorf("local provider: create instance: %w", err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fail(err)
	}
	for _, d := range instanceDirs {
		if err := os.Mkdir(filepath.Join(tmp, d), 0o755); err != nil {
			return fail(err)
		}
	}
	hostPEM, err := newKeyPEM(id)
	if err != nil {
		return fail(err)
	}
	hostSigner, err := ssh.ParsePrivateKey(hostPEM)
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, hostKeyFile), hostPEM, 0o600); err != nil {
		return fail(err)
	}
	if err := p.chownInstance(tmp); err != nil {
		return fail(err)
	}
	m := &meta{
		ID: id, State: wantRunning, Boot: string(provider.StateCreating),
		HostKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostSigner.PublicKey()))),
		Network: p.cfg.Network, UserNS: true, CreatedAt: time.Now().UTC(),
	}
	// What start records before it starts the sandbox (address, cgroups)
	// goes into the first meta.json already: one write fewer per sandbox.
	// A crash before the rename leaves a dot directory (cleanLeftovers)
	// and, at most, empty cgroups (cleanCgroups).
	lnFile, undo, err := p.prepare(m)
	if err != nil {
		return fail(err)
	}
	defer lnFile.Close()
	if err := p.saveMeta(filepath.Join(tmp, metaFile), m, true); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, p.instDir(id)); err != nil {
		return fail(err)
	}
	defer p.lock(id)()
	if err := p.launch(m, lnFile, hostPEM); err != nil {
		// Leave nothing behind: the scaler never learned the ID.
		p.destroy(m)
		return fmt.Errorf("local provider: start sandbox %s: %w", id, err)
	}
	return nil
}

// start starts the sandbox process of m and records it in meta.json. It
// reuses the previous SSH port when it is free so that addresses stay
// stable across resumes.
func (p *Provider) start(m *meta) error {
	dir := p.instDir(m.ID)
	for _, f := range []string{readyFile, pidFile} {
		os.Remove(filepath.Join(dir, f))
	}
	lnFile, undo, err := p.prepare(m)
	if err != nil {
		return err
	}
	defer lnFile.Close()
	hostKey, err := os.ReadFile(filepath.Join(dir, hostKeyFile))
	if err != nil {
		undo()
		return fmt.Errorf("read host key: %w", err)
	}
	if err := p.saveMeta(filepath.Join(dir, metaFile), m, true); err != nil {
		undo()
		return err
	}
	return p.launch(m, lnFile, hostKey)
}

// prepare opens the SSH listener of m's next sandbox and makes its
// cgroups, and records both in m (not yet on disk), with no PID and the
// boot clock starting now. undo releases what prepare made, for a caller
// that fails before meta.json records it.
func (p *Provider) prepare(m *meta) (lnFile *os.File, undo func(), err error) {
	ln, err := listenLoopback(m.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("open SSH listener: %w", err)
	}
	lnFile, err = ln.File()
	ln.Close()
	if err != nil {
		return nil, nil, err
	}
	m.Addr = ln.Addr().String()
	// A stopped instance's cgroup was removed with its processes; make
	// (again) the one of this berth process.
	m.Cgroup, m.PidsCgroup = "", ""
	undo = func() {
		lnFile.Close()
		if m.Cgroup != "" {
			os.Remove(m.Cgroup)
		}
		if m.PidsCgroup != "" {
			os.Remove(m.PidsCgroup)
		}
	}
	if p.cgroups != nil {
		cg, err := p.cgroups.create(m.ID, p.cfg)
		if err != nil {
			undo()
			return nil, nil, err
		}
		m.Cgroup = cg
		if max := p.pidsMax(); p.cgroups.pidsV1 != "" && max > 0 {
			if m.PidsCgroup, err = pidsV1Create(p.cgroups.pidsV1, m.ID, max); err != nil {
				undo()
				return nil, nil, err
			}
		}
	}
	m.PID, m.StartTime, m.StartedAt = 0, 0, time.Now().UTC()
	return lnFile, undo, nil
}

// launch starts the sandbox process of m, whose meta.json already records
// its listener and cgroups, and records its PID.
func (p *Provider) launch(m *meta, lnFile *os.File, hostKey []byte) error {
	dir := p.instDir(m.ID)
	p.watchReady(m.ID)
	sc := p.sandboxConfig(m.ID, string(hostKey))
	sc.Dir = dir
	if pidsCgroup := m.PidsCgroup != "" || (m.Cgroup != "" && p.cgroups.has("pids")); !pidsCgroup {
		// Without a pids cgroup (unprivileged berth), the sandbox bounds
		// its jobs' processes with RLIMIT_NPROC instead.
		sc.NProc = p.pidsMax()
	}
	diskPoll := p.diskPollFor(m.ID, filepath.Join(dir, diskDir))
	sc.DiskPoller = diskPoll != nil
	var execHost *execHost
	var execSock *os.File
	var err error
	if localExecEnabled {
		if execHost, execSock, err = newExecSocket(); err != nil {
			p.log.Warn("no local exec socket for the sandbox; jobs run over SSH", "id", m.ID, "err", err)
		}
		sc.Exec = execSock != nil
	}
	cmd, err := p.command(dir, lnFile, m.Cgroup, sc, diskPoll, execSock)
	if err != nil {
		if execHost != nil {
			execHost.f.Close()
		}
		return err
	}
	pid, done, err := p.startSandbox(cmd)
	closeCmdFiles(cmd)
	if err != nil {
		if execHost != nil {
			execHost.f.Close()
		}
		return err
	}
	if execHost != nil {
		p.execs.set(m.ID, execHost)
	}
	p.startedChild(m.ID, pid, done)
	if m.PidsCgroup != "" {
		if err := pidsV1Add(m.PidsCgroup, pid); err != nil {
			unix.Kill(pid, unix.SIGKILL)
			return err
		}
	}
	_, start, err := procStat(pid)
	if err != nil {
		return fmt.Errorf("read start time of sandbox %d: %w", pid, err)
	}
	m.PID, m.StartTime = pid, start
	return p.saveMeta(filepath.Join(dir, metaFile), m, true)
}

func listenLoopback(prev string) (*net.TCPListener, error) {
	if prev != "" {
		if ln, err := net.Listen("tcp", prev); err == nil {
			return ln.(*net.TCPListener), nil
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return ln.(*net.TCPListener), nil
}

// pid returns the sandbox process of m, falling back to the PID file the
// sandbox writes itself when berth died before recording it.
func (p *Provider) pid(m *meta) (int, uint64) {
	if m.PID > 0 {
		return m.PID, m.StartTime
	}
	if m.State == wantRunning {
		if pid, start, ok := readPIDFile(p.instDir(m.ID)); ok {
			return pid, start
		}
	}
	return 0, 0
}

func (p *Provider) running(m *meta) bool {
	pid, start := p.pid(m)
	return alive(pid, start)
}

// Update lists every instance. It also repairs what an interrupted call
// left behind: deletions are finished, and a suspended instance that runs
// (or a running one that is frozen) is brought in line with meta.json.
func (p *Provider) Update(ctx context.Context, fn func(id string, s provider.State)) error {
	entries, err := os.ReadDir(filepath.Join(p.dir, "instances"))
	if err != nil {
		return fmt.Errorf("local provider: list instances: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.IsDir() {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		st, ok := p.observe(e.Name())
		if ok {
			fn(e.Name(), st)
		}
	}
	return nil
}

// stop suspends the sandbox of m: freeze its cgroup when there is one,
// otherwise kill it (the directory stays).
func (p *Provider) stop(m *meta) error {
	if m.Cgroup != "" && p.running(m) {
		return cgroupFreeze(m.Cgroup, true)
	}
	return p.kill(m)
}

// kill kills every process of the instance and waits until its init is
// gone.
func (p *Provider) kill(m *meta) error {
	if m.Cgroup != "" {
		if err := cgroupKill(m.Cgroup); err != nil {
			return err
		}
	}
	pid, start := p.pid(m)
	if !alive(pid, start) {
		return p.removePidsCgroup(m)
	}
	// SIGKILL to the PID namespace's init makes the kernel kill every
	// process in the namespace.
	if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill sandbox %d: %w", pid, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid, start) {
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox process %d still alive 10s after SIGKILL", pid)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return p.removePidsCgroup(m)
}

// removePidsCgroup removes the v1 pids cgroup of a sandbox whose processes
// are gone.
func (p *Provider) removePidsCgroup(m *meta) error {
	if m.PidsCgroup == "" {
		return nil
	}
	return pidsV1Remove(m.PidsCgroup)
}

// checkLimits refuses limits set in provider_config that this host cannot
// enforce, so that the problem shows at start rather than at the first
// instance.
func (p *Provider) checkLimits() error {
	// pids_max works everywhere: without a pids cgroup the sandbox sets
	// RLIMIT_NPROC instead.
	if (p.cfg.MemoryMax != "" || p.cfg.CPUMax != "") && p.cgroups == nil {
		return errors.New("local provider: memory_max and cpu_max need a writable cgroup tree (run berth as root on a cgroup v2 host) or remove them from provider_config")
	}
	for _, l := range []struct {
		set      bool
		key, ctl string
		fallback bool
	}{
		{p.cfg.MemoryMax != "", "memory_max", "memory", false},
		{p.cfg.CPUMax != "", "cpu_max", "cpu", false},
	} {
		if l.set && !p.cgroups.has(l.ctl) && !l.fallback {
			return fmt.Errorf("local provider: provider_config %s needs the cgroup v2 %s controller, which berth's cgroup %s does not offer (it offers %v); enable it for berth's cgroup (e.g. systemd Delegate=yes) or remove %s", l.key, l.ctl, filepath.Dir(p.cgroups.dir), p.cgroups.controllers, l.key)
		}
	}
	return nil
}

// pidsMax is the pids limit per instance: pids_max, or the default.
func (p *Provider) pidsMax() int {
	if p.cfg.PidsMax != nil {
		return *p.cfg.PidsMax
	}
	return defaultPidsMax
}

// destroy kills the instance and removes its directory. Calling it again
// after a failure, or for a gone instance, is safe.
func (p *Provider) destroy(m *meta) error {
	if err := p.kill(m); err != nil {
		return err
	}
	dir := p.instDir(m.ID)
	// The root mount point is busy only in the sandbox's own mount
	// namespace, which is gone now.
	gone := filepath.Join(p.dir, "instances", ".del-"+m.ID)
	if err := os.Rename(dir, gone); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove instance dir: %w", err)
	}
	if err := removeAll(gone); err != nil {
		return fmt.Errorf("remove instance dir: %w", err)
	}
	if p.cgroups != nil {
		p.cgroups.tidy()
	}
	p.forget(m.ID)
	p.mu.Lock()
	delete(p.locks, m.ID)
	p.mu.Unlock()
	return nil
}

// Decrease deletes instances: every process is killed and the directory
// removed. Unknown but well-formed IDs count as already deleted, so retries
// are safe; malformed IDs are errors.
func (p *Provider) Decrease(ctx context.Context, ids []string) ([]string, error) {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted []string
		errs     []error
	)
	for _, id := range ids {
		if err := checkID(id); err != nil {
			errs = append(errs, err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.decrease(id)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("local provider: delete %s: %w", id, err))
				return
			}
			accepted = append(accepted, id)
		}()
	}
	wg.Wait()
	return accepted, errors.Join(errs...)
}

func (p *Provider) decrease(id string) error {
	defer p.lock(id)()
	m, err := readMeta(p.instDir(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if m.State != wantDeleting {
		// Record the intent first: a berth that dies now finishes the
		// deletion in its next Update.
		m.State = wantDeleting
		if err := p.saveMeta(filepath.Join(p.instDir(id), metaFile), m, false); err != nil {
			return err
		}
	}
	return p.destroy(m)
}

// Suspend suspends running instances; see the package documentation for
// what survives.
func (p *Provider) Suspend(ctx context.Context, ids []string) ([]string, error) {
	return p.each(ids, func(id string) error {
		defer p.lock(id)()
		m, err := p.existing(id)
		if err != nil {
			return err
		}
		switch m.State {
		case wantSuspended:
			return nil
		case wantDeleting:
			return errors.New("instance is being deleted")
		}
		m.State = wantSuspended
		if err := p.saveMeta(filepath.Join(p.instDir(id), metaFile), m, false); err != nil {
			return err
		}
		if err := p.stop(m); err != nil {
			return err
		}
		if m.Cgroup == "" {
			m.PID, m.StartTime = 0, 0
			return p.saveMeta(filepath.Join(p.instDir(id), metaFile), m, false)
		}
		return nil
	})
}

// Resume resumes suspended instances: a frozen sandbox is thawed, a stopped
// one started again with the same ID, directory and host key. Resumed
// instances report "resuming" until their SSH server serves.
func (p *Provider) Resume(ctx context.Context, ids []string) ([]string, error) {
	return p.each(ids, func(id string) error {
		defer p.lock(id)()
		m, err := p.existing(id)
		if err != nil {
			return err
		}
		switch m.State {
		case wantRunning:
			return nil
		case wantDeleting:
			return errors.New("instance is being deleted")
		}
		if m.Cgroup != "" && p.running(m) {
			if err := cgroupFreeze(m.Cgroup, false); err != nil {
				return err
			}
			m.State, m.Boot = wantRunning, string(provider.StateResuming)
			if err := p.saveMeta(filepath.Join(p.instDir(id), metaFile), m, true); err != nil {
				return err
			}
			// A thawed sandbox serves SSH at once; a restarted one says so
			// through its ready file (watchReady).
			p.notify(id, provider.StateRunning)
			return nil
		}
		if err := p.kill(m); err != nil { // leftovers of a frozen cgroup
			return err
		}
		m.State, m.Boot = wantRunning, string(provider.StateResuming)
		return p.start(m)
	})
}

func (p *Provider) each(ids []string, fn func(id string) error) ([]string, error) {
	var accepted []string
	var errs []error
	for _, id := range ids {
		if err := checkID(id); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := fn(id); err != nil {
			errs = append(errs, fmt.Errorf("local provider: %s: %w", id, err))
			continue
		}
		accepted = append(accepted, id)
	}
	return accepted, errors.Join(errs...)
}

func (p *Provider) existing(id string) (*meta, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	// Through Update's cache: ConnectInfo runs for every job, and an
	// unchanged meta.json costs a stat instead of a read and a decode.
	o, err := p.lookMeta(id, false)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("local provider: no instance %s (deleted, or created by another state dir)", id)
	}
	if err != nil {
		return nil, err
	}
	m := *o.m // a copy: callers change it
	return &m, nil
}

// ConnectInfo returns the SSH address, host key and client key of an
// instance.
func (p *Provider) ConnectInfo(ctx context.Context, id string) (provider.ConnectInfo, error) {
	m, err := p.existing(id)
	if err != nil {
		return provider.ConnectInfo{}, err
	}
	return provider.ConnectInfo{
		ID: id, Addr: m.Addr, Username: "root", HostKey: m.HostKey,
		PrivateKey: append([]byte(nil), p.clientPEM...),
		OS:         "linux", Arch: runtime.GOARCH,
		Local: p.localExec(id, m),
	}, nil
}

// Heartbeat completes an SSH handshake with the instance, checking its host
// key, and fails for instances that are not running.
func (p *Provider) Heartbeat(ctx context.Context, id string) error {
	m, err := p.existing(id)
	if err != nil {
		return err
	}
	if m.State != wantRunning {
		return fmt.Errorf("local provider: instance %s is %s", id, m.State)
	}
	if h := p.localExec(id, m); h != nil {
		// Jobs reach this sandbox through its exec socket: check that.
		err := askLocal(ctx, h, localexec.OpPing, 10*time.Second)
		if err == nil {
			return nil
		}
		if !errors.Is(err, provider.ErrLocalExecUnavailable) {
			return fmt.Errorf("local provider: heartbeat %s: %w", id, err)
		}
	}
	sc, err := p.dialSandbox(ctx, m, 10*time.Second)
	if err != nil {
		return fmt.Errorf("local provider: heartbeat %s: %w", id, err)
	}
	return sc.Close()
}

// dialSandbox logs in to instance m's SSH server as berth itself (the
// client key and the host key the provider recorded), for the provider's
// own requests: it opens no channel and accepts none. The connection must
// answer within timeout.
func (p *Provider) dialSandbox(ctx context.Context, m *meta, timeout time.Duration) (ssh.Conn, error) {
	hostKey, _, _, _, err := ssh.ParseAuthorizedKey([]byte(m.HostKey))
	if err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", m.Addr)
	if err != nil {
		return nil, err
	}
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	sc, chans, reqs, err := ssh.NewClientConn(c, m.Addr, &ssh.ClientConfig{
		User:            "root",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(p.signer)},
		HostKeyCallback: ssh.FixedHostKey(hostKey),
	})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("SSH handshake: %w", err)
	}
	go ssh.DiscardRequests(reqs)
	go func() {
		for nc := range chans {
			nc.Reject(ssh.Prohibited, "no")
		}
	}()
	return sc, nil
}

// Shutdown stops notifications; instances keep running and a later Init on
// the same state directory adopts them.
func (p *Provider) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.watcher != nil {
		p.watcher.close()
		p.watcher = nil
	}
	if p.disks != nil {
		p.disks.close()
		p.disks = nil
	}
	p.stopSpawner()
	return nil
}

// diskPollFor registers the sandbox about to start for instance id with
// the provider's diskPoller and returns the sandbox's end of its socket, or
// nil when the sandbox is to watch the free space itself (no disk_max nor inodes_max, a
// disk on another file system, or no poller).
func (p *Provider) diskPollFor(id, disk string) *os.File {
	if p.diskMax <= 0 && p.inodesMax <= 0 {
		return nil
	}
	p.mu.Lock()
	if p.disks == nil && !p.noDisks {
		d, err := newDiskPoller(filepath.Join(p.dir, "instances"), p.log)
		if err != nil {
			p.log.Warn("cannot watch the instances' disk space for all sandboxes at once; each sandbox polls it itself", "err", err)
			p.noDisks = true
		}
		p.disks = d
	}
	d := p.disks
	p.mu.Unlock()
	if d == nil {
		return nil
	}
	f, err := d.add(id, disk)
	if err != nil {
		p.log.Warn("sandbox polls the disk's free space itself", "id", id, "err", err)
		return nil
	}
	return f
}

var _ provider.Suspender = (*Provider)(nil)

// Recycle resets a running instance between two jobs: the sandbox kills
// every process but its init, empties /tmp, /dev/shm and /berth and resets
// its hostname. When that fails the sandbox is killed, so that Update
// reports it as timed out and the next job never sees what the last one
// left.
func (p *Provider) Recycle(ctx context.Context, id string) error {
	m, err := p.existing(id)
	if err != nil {
		return err
	}
	if m.State != wantRunning {
		return fmt.Errorf("local provider: cannot recycle %s: it is %s", id, m.State)
	}
	err = p.sendRecycle(ctx, m)
	if err == nil {
		return nil
	}
	defer p.lock(id)()
	// PID 1 holds its end of the exec socket until it exits, so a broken
	// socket means it is gone even before the reaper has seen it.
	if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.ECONNRESET) || !p.runningNow(id, m) {
		err = fmt.Errorf("%w; %s", err, deathSummary(p.instDir(id)))
	}
	if kerr := p.kill(m); kerr != nil {
		return fmt.Errorf("local provider: recycle %s: %w; killing it failed too: %v", id, err, kerr)
	}
	return fmt.Errorf("local provider: recycle %s: %w; the instance was killed instead", id, err)
}

func (p *Provider) sendRecycle(ctx context.Context, m *meta) error {
	if h := p.localExec(m.ID, m); h != nil {
		err := askLocal(ctx, h, localexec.OpRecycle, time.Minute)
		if !errors.Is(err, provider.ErrLocalExecUnavailable) {
			return err
		}
	}
	sc, err := p.dialSandbox(ctx, m, time.Minute)
	if err != nil {
		return err
	}
	defer sc.Close()
	ok, reply, err := sc.SendRequest(recycleRequest, true, nil)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("sandbox refused: %s", reply)
	}
	return nil
}

var _ provider.Recycler = (*Provider)(nil)
