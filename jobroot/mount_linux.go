package jobroot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// devNodes are bound from the instance's /dev into the job's.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// setupRoot mounts the job's root at is.Root and pivots into it.
func setupRoot(is initSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	// Layer paths are given relative to their directory so that many
	// layers fit the mount options' one page.
	if err := os.Chdir(is.LayerDir); err != nil {
		return err
	}
	opts := fmt.Sprintf("userxattr,lowerdir=%s,upperdir=%s,workdir=%s",
		strings.Join(is.Lower, ":"), is.Upper, is.Work)
	if err := unix.Mount("overlay", is.Root, "overlay", unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount the image's overlay (Linux ≥ 5.11 needed): %w", err)
	}
	r := is.Root
	if err := mountDev(r); err != nil {
		return err
	}
	if err := mkdirMount("proc", filepath.Join(r, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return err
	}
	if err := MaskProc(filepath.Join(r, "proc"), filepath.Join(r, "dev", "null")); err != nil {
		return err
	}
	if err := mkdirMount("tmpfs", filepath.Join(r, "sys"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, "size=4k"); err != nil {
		return err
	}
	for _, b := range is.Binds {
		if err := bind(r, b); err != nil {
			return err
		}
	}
	if err := writeEtc(r, is); err != nil {
		return err
	}
	return PivotRoot(r)
}

// mountDev makes a minimal /dev: a tmpfs with the harmless device nodes,
// its own devpts and /dev/shm.
func mountDev(r string) error {
	dev := filepath.Join(r, "dev")
	if err := mkdirMount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return err
	}
	for _, n := range devNodes {
		dst := filepath.Join(dev, n)
		if err := os.WriteFile(dst, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+n, dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
	}
	if err := mkdirMount("devpts", filepath.Join(dev, "pts"), "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return err
	}
	if err := mkdirMount("tmpfs", filepath.Join(dev, "shm"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size=64m"); err != nil {
		return err
	}
	for name, target := range map[string]string{"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return nil
}

func mkdirMount(src, dst, fstype string, flags uintptr, data string) error {
	if err := mkdirIn(dst); err != nil {
		return err
	}
	if err := unix.Mount(src, dst, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", fstype, dst, err)
	}
	return nil
}

// mkdirIn makes a mount point, replacing a symlink or file the image has
// there: the image must not redirect the runner's mounts.
func mkdirIn(dst string) error {
	if fi, err := os.Lstat(dst); err == nil && !fi.IsDir() {
		os.Remove(dst)
	}
	return os.MkdirAll(dst, 0o755)
}

// bind mounts a path of the instance into the job's root. The target is
// resolved inside the root with symlinks refused, so an image cannot point
// the build directory somewhere on the instance.
func bind(r string, b Bind) error {
	rel := filepath.Clean("/" + b.Target)
	cur := r
	for _, seg := range strings.Split(strings.TrimPrefix(rel, "/"), "/") {
		if seg == "" {
			continue
		}
		cur = filepath.Join(cur, seg)
		if err := mkdirIn(cur); err != nil {
			return fmt.Errorf("bind target %s: %w", b.Target, err)
		}
	}
	if err := unix.Mount(b.Source, cur, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", b.Source, b.Target, err)
	}
	if b.ReadOnly {
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(-1, cur, unix.AT_RECURSIVE, attr); err != nil {
			return fmt.Errorf("make %s read-only: %w", b.Target, err)
		}
	}
	return nil
}

// writeEtc gives the job its hostname, /etc/hosts and the instance's DNS
// settings; they land in the job's upper directory.
func writeEtc(r string, is initSpec) error {
	if err := unix.Sethostname([]byte(is.Hostname)); err != nil {
		return err
	}
	etc := filepath.Join(r, "etc")
	if err := mkdirIn(etc); err != nil {
		return err
	}
	files := map[string][]byte{"hosts": []byte(is.Hosts), "hostname": []byte(is.Hostname + "\n")}
	if len(is.Resolv) > 0 {
		files["resolv.conf"] = is.Resolv
	}
	for name, b := range files {
		p := filepath.Join(etc, name)
		os.Remove(p) // a symlink must not redirect the write
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// PivotRoot makes r the root of the caller's mount namespace and detaches
// the old root, and with it every mount not bound below r. The sandboxes
// of the local provider and the job roots of this package both use it.
func PivotRoot(r string) error {
	if err := os.Chdir(r); err != nil {
		return err
	}
	// pivot_root(".", ".") stacks the old root on top of the new one; the
	// detach then drops it.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the old root: %w", err)
	}
	return os.Chdir("/")
}

// enterJob switches to the job's user and directory, hardens the process
// and executes the command. It returns only on failure.
func enterJob(is initSpec) error {
	if err := os.Chdir(is.Dir); err != nil {
		if err := os.MkdirAll(is.Dir, 0o755); err != nil {
			return fmt.Errorf("working directory %s: %w", is.Dir, err)
		}
		os.Chdir(is.Dir)
	}
	argv0, err := lookPath(is.Argv[0], is.Env)
	if err != nil {
		return err
	}
	if is.Nest {
		return runNested(is, argv0)
	}
	unix.Setgroups(nil) // refused where setgroups is denied; nothing to drop then
	if err := syscall.Setresgid(is.GID, is.GID, is.GID); err != nil {
		return fmt.Errorf("setgid %d: %w", is.GID, err)
	}
	if err := syscall.Setresuid(is.UID, is.UID, is.UID); err != nil {
		return fmt.Errorf("setuid %d: %w", is.UID, err)
	}
	if err := Harden(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	return fmt.Errorf("exec %s: %w", argv0, syscall.Exec(argv0, is.Argv, is.Env))
}

// lookPath finds a command on the job's PATH inside the image.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in the image (PATH=%s)", name, path)
}
