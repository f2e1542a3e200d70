package jobroot

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-ci/berth/images"
)

// RunIfRequested runs the runner or the job's init when the process was
// started as one, and never returns then; otherwise it returns at once.
// Call it first thing in main and in TestMain of packages that start jobs
// in images.
func RunIfRequested() {
	switch os.Getenv(modeEnv) {
	case "":
		return
	case "init":
		runInit()
	case "run":
		os.Exit(runMain())
	}
	fmt.Fprintf(os.Stderr, "berth: unknown %s mode %q\n", modeEnv, os.Getenv(modeEnv))
	os.Exit(2)
}

// runMain reads the spec line from stdin and runs the job.
func runMain() int {
	// One stream: the runner's own lines (the image it pulls) and the
	// job's stdout and stderr share the executor's stdout, so the job's
	// log keeps the order they were written in; the executor reads both
	// of its streams into that one log anyway.
	if err := unix.Dup3(1, 2, 0); err != nil {
		fmt.Fprintf(os.Stderr, "berth: make stderr the runner's stdout: %v\n", err)
	}
	line, err := readLine(os.Stdin)
	if err != nil {
		return reportSetup("", "runner_system_failure", fmt.Errorf("read the job spec from stdin: %w", err))
	}
	var spec Spec
	if err := json.Unmarshal(line, &spec); err != nil {
		return reportSetup("", "runner_system_failure", fmt.Errorf("parse the job spec: %w", err))
	}
	code, err := Run(context.Background(), spec, os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		var se *SetupError
		if errors.As(err, &se) {
			return reportSetup(se.Image, se.Reason, errors.New(se.Message))
		}
		return reportSetup(spec.Image, "runner_system_failure", err)
	}
	return code
}

// readLine reads up to a newline one byte at a time, so that the rest of
// stdin is left for the job.
func readLine(f *os.File) ([]byte, error) {
	var line []byte
	b := make([]byte, 1)
	for len(line) < 1<<20 {
		n, err := f.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				return line, nil
			}
			line = append(line, b[0])
		}
		if err != nil {
			return nil, err
		}
	}
	return nil, errors.New("spec line longer than 1 MiB")
}

func reportSetup(image, reason string, err error) int {
	b, _ := json.Marshal(SetupError{Image: image, Reason: reason, Message: err.Error()})
	// The words for whoever reads the log, then the line the executor
	// reads.
	fmt.Fprintf(os.Stderr, "ERROR: the job could not start: %v\n", err)
	fmt.Fprintf(os.Stderr, "%s%s\n", ErrorPrefix, b)
	return ExitSetupFailed
}

// CacheDir is where the runner keeps images and job directories when the
// spec names none.
func CacheDir(s Settings) string {
	// A launcher that keeps the cache itself (the local provider's) says
	// where, whatever the job's settings say.
	if d := os.Getenv(cacheEnv); d != "" {
		return d
	}
	if s.CacheDir != "" {
		return s.CacheDir
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "berth")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("berth-%d", os.Getuid()))
}

// Run runs spec's job in its image with the given stdio and returns its exit
// status. A failure to start the job is a *SetupError.
func Run(ctx context.Context, spec Spec, stdin, stdout, stderr *os.File) (int, error) {
	if Harden == nil {
		return -1, &SetupError{Image: spec.Image, Reason: "runner_system_failure",
			Message: "this berth binary has no seccomp filter linked in; jobs in images cannot start"}
	}
	if spec.BindWorkdir {
		wd, err := os.Getwd()
		if err != nil {
			return -1, setupErr(spec.Image, "runner_system_failure", err)
		}
		spec.Binds = append(spec.Binds, Bind{Source: wd, Target: wd})
		spec.Dir = wd
	}
	start := time.Now()
	spec.Hosts = serviceHosts(spec.Services)
	// Every init starts from this locked thread, so that PDEATHSIG
	// fires only when the runner itself dies.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	stop, err := startServices(ctx, spec, stderr)
	defer stop()
	if err != nil {
		return -1, err
	}
	p, is, cleanup, err := prepare(ctx, spec, stdin, stdout, stderr, stderr)
	defer cleanup()
	if err != nil {
		return -1, err
	}
	slog.Debug("job started", "image", spec.Image, "ms", time.Since(start).Milliseconds())
	return waitInit(p, is)
}

// prepare makes spec's image ready, builds its job directory and starts its
// init; cleanup releases the image and removes the directory. What berth
// says about it (the pull, the user) goes to log.
func prepare(ctx context.Context, spec Spec, stdin, stdout, stderr *os.File, log io.Writer) (*os.Process, initSpec, func(), error) {
	var is initSpec
	im, err := getImage(ctx, spec, log)
	if err != nil {
		return nil, is, func() {}, err
	}
	job, err := newJobDir(filepath.Join(CacheDir(spec.Settings), "jobs"))
	if err != nil {
		im.Release()
		return nil, is, func() {}, setupErr(spec.Image, "runner_system_failure", fmt.Errorf("make the job directory: %w", err))
	}
	cleanup := func() { job.remove(); im.Release() }
	is, maps, err := buildInit(spec, im, job, log)
	if err != nil {
		return nil, is, cleanup, setupErr(spec.Image, "runner_system_failure", err)
	}
	p, err := startInit(is, maps, stdin, stdout, stderr)
	return p, is, cleanup, err
}

func setupErr(image, reason string, err error) *SetupError {
	return &SetupError{Image: image, Reason: reason, Message: fmt.Sprintf("image %q: %v", image, err)}
}

// getImage pulls or finds the image and says so in the job's log.
func getImage(ctx context.Context, spec Spec, log io.Writer) (*images.Image, error) {
	s := spec.Settings
	cache, err := images.Open(images.Config{
		Dir: ImagesDir(CacheDir(s)), MaxBytes: s.CacheBytes,
		Insecure: s.Insecure, Allowed: s.Allowed, Policy: images.PullPolicy(s.PullPolicy),
		Limits: s.Limits, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Progress: NewPullLog(log, "").Event,
	})
	if err != nil {
		return nil, setupErr(spec.Image, "runner_system_failure", err)
	}
	t := time.Now()
	im, err := cache.Get(ctx, spec.Image, spec.Credentials)
	if err != nil {
		var pe *images.PullError
		if errors.As(err, &pe) {
			msg := pe.Error()
			if note := os.Getenv("BERTH_JOBROOT_UNREACHABLE"); note != "" && pe.Kind == images.KindUnreachable {
				msg += " (" + note + ")"
			}
			return nil, &SetupError{Image: spec.Image, Reason: pe.FailureReason(), Message: msg}
		}
		return nil, setupErr(spec.Image, "runner_system_failure", err)
	}
	verb := "Using cached"
	if im.Pulled {
		verb = "Pulled"
	}
	fmt.Fprintf(log, "%s image %s (%s, %d layers, %.1f MB) in %s\n", verb, spec.Image, im.Digest,
		len(im.LayerDirs), float64(im.Size)/1e6, time.Since(t).Round(time.Millisecond))
	return im, nil
}

// startInit starts the job's init in its namespaces and waits for it. The
// OS thread stays locked so that PDEATHSIG fires only when the runner dies.
func startInit(is initSpec, maps idMaps, stdin, stdout, stderr *os.File) (*os.Process, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	p, err := os.StartProcess("/proc/self/exe", []string{"berth-job-init"}, &os.ProcAttr{
		Env:   []string{modeEnv + "=init"},
		Files: []*os.File{stdin, stdout, stderr, pr},
		Sys: &syscall.SysProcAttr{
			Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
				unix.CLONE_NEWUTS | unix.CLONE_NEWIPC,
			UidMappings: maps.uid, GidMappings: maps.gid,
			GidMappingsEnableSetgroups: maps.setgroups,
			Pdeathsig:                  unix.SIGKILL,
		},
	})
	if err != nil {
		pw.Close()
		return nil, setupErr(is.Image, "runner_system_failure", fmt.Errorf("start the job in new namespaces (the instance needs unprivileged user namespaces, or root): %w", err))
	}
	err = json.NewEncoder(pw).Encode(is)
	pw.Close()
	if err != nil {
		p.Kill()
		p.Wait()
		return nil, setupErr(is.Image, "runner_system_failure", fmt.Errorf("hand the job its spec: %w", err))
	}
	return p, nil
}

// waitInit waits for an init and returns its exit status (128+N for
// signal N).
func waitInit(p *os.Process, is initSpec) (int, error) {
	ps, err := p.Wait()
	if err != nil {
		return -1, err
	}
	ws := ps.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal()), nil
	}
	return ws.ExitStatus(), nil
}

// jobDir is one job's private directory: upper and work of the overlay and
// the mount point of its root. A lock held while the job runs tells a later
// runner's sweep which directories are abandoned.
type jobDir struct {
	path string
	lock *os.File
}

// newJobDir makes a job's directory under parent. Its lock file comes
// first and is locked before the directory exists: another runner's sweep
// removes a directory whose lock it can take, so a directory made before
// its lock was held could vanish under a live job.
func newJobDir(parent string) (*jobDir, error) {
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, err
	}
	sweepJobDirs(parent)
	lock, err := lockedJobFile(parent)
	if err != nil {
		return nil, err
	}
	p := strings.TrimSuffix(lock.Name(), ".lock")
	if err := os.Mkdir(p, 0o700); err != nil {
		os.Remove(lock.Name())
		lock.Close()
		return nil, err
	}
	for _, d := range []string{"upper", "work", "root"} {
		if err := os.Mkdir(filepath.Join(p, d), 0o755); err != nil {
			return nil, err
		}
	}
	return &jobDir{path: p, lock: lock}, nil
}

// lockedJobFile creates a new job-*.lock file under parent and locks it.
// A sweep may take and remove the file between the two; then it makes
// another.
func lockedJobFile(parent string) (*os.File, error) {
	for {
		lock, err := os.CreateTemp(parent, "job-*.lock")
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
			lock.Close()
			return nil, err
		}
		held, err1 := lock.Stat()
		named, err2 := os.Stat(lock.Name())
		if err1 == nil && err2 == nil && os.SameFile(held, named) {
			return lock, nil
		}
		lock.Close() // swept before we held it
	}
}

func (j *jobDir) remove() {
	removeTree(j.path)
	os.Remove(j.path + ".lock")
	j.lock.Close()
}

// sweepJobDirs removes job directories whose runner died without cleaning
// up (their lock is free).
func sweepJobDirs(parent string) {
	locks, _ := filepath.Glob(filepath.Join(parent, "job-*.lock"))
	for _, l := range locks {
		f, err := os.OpenFile(l, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			removeTree(strings.TrimSuffix(l, ".lock"))
			os.Remove(l)
		}
		f.Close()
	}
}

// removeTree removes a directory whose entries may lack the owner's write
// or search bits (a job may chmod its files).
func removeTree(dir string) error {
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

// readImageFile scans the image's layers top down for a file such as
// etc/passwd (a whiteout or anything not a regular file ends the search).
func readImageFile(layers []string, name string) []byte {
	for i := len(layers) - 1; i >= 0; i-- {
		p := filepath.Join(layers[i], name)
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		b, _ := os.ReadFile(p)
		return b
	}
	return nil
}

// lookupID finds a user or group name's ID in a passwd or group file.
func lookupID(file []byte, name string) (uid, gid int, ok bool) {
	sc := bufio.NewScanner(strings.NewReader(string(file)))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) >= 3 && f[0] == name {
			uid, err1 := atoi(f[2])
			gid := uid
			var err2 error
			if len(f) >= 4 {
				gid, err2 = atoi(f[3])
			}
			return uid, gid, err1 == nil && err2 == nil
		}
	}
	return 0, 0, false
}

func atoi(s string) (int, error) {
	var n int
	_, err := fmt.Sscan(s, &n)
	return n, err
}
